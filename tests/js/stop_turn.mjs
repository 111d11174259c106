// useChat's stop() with the `ai` package's own DefaultChatTransport (tests/live/test_ai_sdk_stop.py): ask, abort
// the request once text has come (what stop() does: it aborts the signal the transport gave fetch), then
// reconnect as resumeStream() would and read the replay. Prints one JSON line.
//
//   SILVIA_URL=... SILVIA_TOKEN=... SILVIA_SESSION=... node tests/js/stop_turn.mjs "question"
import { DefaultChatTransport, readUIMessageStream } from "ai";
import { stoppingFetch } from "../../examples/ai-sdk/stopping.mjs";

const base = process.env.SILVIA_URL;
const headers = { Authorization: `Token ${process.env.SILVIA_TOKEN}` };
const session = process.env.SILVIA_SESSION;
let turnId = null;
let stopped = null;
const transport = new DefaultChatTransport({
  api: `${base}/api/chat/sessions/${session}/turns/?protocol=ai-sdk`,
  headers,
  fetch: stoppingFetch({ base, headers, onStop: (status) => (stopped = status) }),
  prepareSendMessagesRequest: ({ messages, headers }) => ({
    body: { message: messages.at(-1).parts.map((part) => part.text ?? "").join("") },
    headers,
  }),
  prepareReconnectToStreamRequest: ({ headers }) => ({
    api: `${base}/api/chat/turns/${turnId}/events?protocol=ai-sdk`,
    headers,
  }),
});

const text = (message) => (message?.parts ?? []).filter((p) => p.type === "text").map((p) => p.text).join("");
const controller = new AbortController();
const user = { id: "u1", role: "user", parts: [{ type: "text", text: process.argv[2] ?? "Tell me a long story" }] };
const stream = await transport.sendMessages({
  chatId: session, trigger: "submit-message", messageId: undefined, messages: [user], abortSignal: controller.signal,
});
let partial = "";
let aborted = false;
try {
  for await (const message of readUIMessageStream({ stream })) {
    turnId = message.id;
    partial = text(message);
    if (partial && !aborted) {
      aborted = true;
      controller.abort(); // chat.stop()
    }
  }
} catch (error) {
  if (error.name !== "AbortError") throw error;
}
const stopStatus = await stopped;

const errors = [];
let replay = null;
for await (replay of readUIMessageStream({
  stream: await transport.reconnectToStream({ chatId: session }),
  onError: (error) => errors.push(error.message),
})) {
  // the replay, from the start
}
process.stdout.write(
  `${JSON.stringify({ turnId, partial, stopStatus, replayText: text(replay), errors, metadata: replay?.metadata })}\n`,
);
