// useChat's stop() through to the service: a `fetch` for DefaultChatTransport that stops the turn on the server
// when the client aborts its request (docs/live.md#stopping-a-turn).
//
// The AI SDK's stop() only aborts the transport's request (the `abortSignal` it gives sendMessages, which the
// transport hands to fetch as `signal`); it never tells the server, and the service's turns do not stop when
// their client leaves. This fetch reads the turn's id from the POST's `X-Turn-Id` header and, when that
// request's signal aborts, posts /api/chat/turns/<id>/stop. Only the POST: a reconnect's request is also
// aborted when another resumeStream() starts, which must not stop the turn.
//
//   new DefaultChatTransport({ ..., fetch: stoppingFetch({ base, headers }) })
export function stoppingFetch({ base, headers = {}, fetch: inner = globalThis.fetch, onStop = () => {} }) {
  return async (url, init = {}) => {
    const response = await inner(url, init);
    const turnId = response.headers.get("x-turn-id");
    const signal = init.signal;
    if ((init.method ?? "GET").toUpperCase() === "POST" && turnId && signal) {
      const stop = () =>
        onStop(
          inner(`${base}/api/chat/turns/${encodeURIComponent(turnId)}/stop`, { method: "POST", headers }).then(
            (answer) => answer.status, // 200 stopped; 409 it had ended already
            () => null,
          ),
        );
      if (signal.aborted) stop();
      else signal.addEventListener("abort", stop, { once: true });
    }
    return response;
  };
}
