// A minimal useChat page against the service (not built by CI: needs react and @ai-sdk/react@3, which
// pairs with the ai version package.json pins). docs/live.md#the-ai-sdk-stream-protocolai-sdk
import { useChat } from "@ai-sdk/react";
import { DefaultChatTransport } from "ai";
import { useMemo, useRef, useState } from "react";
import { citationChip } from "./chips.mjs";
import { stoppingFetch } from "./stopping.mjs";

// A refused request's error holds the service's JSON body: {"detail": ...}, or a 400's {field: [...]}
// (the message, or an unknown ?protocol=); a failed turn's, its message, fit to show the user.
const errorText = (error) => {
  try {
    const body = JSON.parse(error.message);
    return body.detail ?? Object.values(body).flat()[0] ?? error.message;
  } catch {
    return error.message;
  }
};

export function Chat({ base, token, sessionId }) {
  const turnId = useRef(null);
  const transport = useMemo(
    () =>
      new DefaultChatTransport({
        api: `${base}/api/chat/sessions/${sessionId}/turns/?protocol=ai-sdk`,
        headers: { Authorization: `Token ${token}` },
        // stop() aborts the request; this fetch then stops the turn on the server (docs/live.md#stopping-a-turn).
        fetch: stoppingFetch({ base, headers: { Authorization: `Token ${token}` } }),
        prepareSendMessagesRequest: ({ messages, headers }) => ({
          body: { message: messages.at(-1).parts.map((part) => part.text ?? "").join("") },
          headers,
        }),
        prepareReconnectToStreamRequest: ({ headers }) => ({
          api: `${base}/api/chat/turns/${turnId.current}/events?protocol=ai-sdk`,
          headers,
        }),
      }),
    [base, token, sessionId],
  );
  const { messages, sendMessage, resumeStream, stop, status, error } = useChat({
    id: sessionId,
    transport,
    // A `data-rewind` part: what was shown is being answered again. The turn goes on; once this
    // stream ends, a reconnect replays the turn with the rewind applied, replacing the message.
    onFinish: ({ message, isDisconnect }) => {
      if (isDisconnect || message.parts.some((part) => part.type === "data-rewind")) resumeStream();
    },
  });
  const last = messages.at(-1);
  if (last?.role === "assistant") turnId.current = last.id;
  const [input, setInput] = useState("");

  return (
    <main>
      {messages.map((message) => (
        <article key={message.id} className={message.role}>
          {message.parts.map((part, index) => {
            if (part.type === "text") return <span key={index}>{part.text}</span>;
            if (part.type !== "data-citation") return null;
            const chip = citationChip(part.data);
            return chip.href ? (
              <a
                key={index}
                className="chip"
                href={chip.href}
                title={part.data.cited_text}
                target="_blank"
                rel="noopener noreferrer"
              >
                {chip.label}
              </a>
            ) : (
              <span key={index} className="chip" title={part.data.cited_text}>
                {chip.label}
              </span>
            );
          })}
        </article>
      ))}
      {error && <p role="alert">{errorText(error)}</p>}
      <form
        onSubmit={(event) => {
          event.preventDefault();
          sendMessage({ text: input });
          setInput("");
        }}
      >
        <input value={input} onChange={(event) => setInput(event.target.value)} disabled={status !== "ready"} />
        {status === "streaming" && (
          <button type="button" onClick={() => stop()}>
            Stop
          </button>
        )}
      </form>
    </main>
  );
}
