// Ask the service one question over the AI SDK stream and print the answer with its citation chips.
//
//   SILVIA_TOKEN=<DRF token> node examples/ai-sdk/ask.mjs "How much do I owe on my credit cards?"
//
// SILVIA_URL: the service (default http://127.0.0.1:8000); SILVIA_SESSION: a session id (a new one when
// unset); SILVIA_TURN: a turn id, to reconnect to that turn (its answer replayed from the start) instead of
// asking. Uses the `ai` package the repository pins (npm ci). docs/live.md#the-ai-sdk-stream-protocolai-sdk
import { randomUUID } from "node:crypto";
import { DefaultChatTransport, readUIMessageStream } from "ai";
import { citationChip } from "./chips.mjs";

const base = process.env.SILVIA_URL ?? "http://127.0.0.1:8000";
const session = process.env.SILVIA_SESSION ?? randomUUID();
const question = process.argv[2] ?? "How much do I owe on my credit cards?";
// The assistant message's id is the turn's id (the `start` chunk's messageId): what a reconnect names.
let turnId = process.env.SILVIA_TURN ?? null;

const transport = new DefaultChatTransport({
  api: `${base}/api/chat/sessions/${session}/turns/?protocol=ai-sdk`,
  headers: { Authorization: `Token ${process.env.SILVIA_TOKEN}` },
  // The service takes {"message": text}, not the AI SDK's message list (history is the session's).
  prepareSendMessagesRequest: ({ messages, headers }) => ({
    body: { message: messages.at(-1).parts.map((part) => part.text ?? "").join("") },
    headers,
  }),
  // A reconnect replays the turn from its start (the transport's default, resumeStreamIsReplay).
  prepareReconnectToStreamRequest: ({ headers }) => ({
    api: `${base}/api/chat/turns/${turnId}/events?protocol=ai-sdk`,
    headers,
  }),
});

const user = { id: randomUUID(), role: "user", parts: [{ type: "text", text: question }] };
const stream =
  turnId !== null
    ? await transport.reconnectToStream({ chatId: session })
    : await transport.sendMessages({
        chatId: session,
        trigger: "submit-message",
        messageId: undefined,
        messages: [user],
        abortSignal: undefined,
      });
const errors = [];
let message = null;
for await (message of readUIMessageStream({ stream, onError: (error) => errors.push(error.message) })) {
  turnId = message.id;
}

// The text parts in order, each citation's chip right after the text it cites.
let out = "";
for (const part of message?.parts ?? []) {
  if (part.type === "text") out += part.text;
  if (part.type === "data-citation") {
    const chip = citationChip(part.data);
    out += chip.href ? ` [${chip.label}](${chip.href})` : ` [${chip.label}]`;
  }
}
process.stdout.write(`${out}\n`);
if (errors.length) {
  process.stderr.write(`${errors.join("\n")}\n`);
  process.exit(1);
}
