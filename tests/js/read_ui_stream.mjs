// Reads one live turn with the `ai` package's own client code and prints the UIMessage it builds (test-only).
//
//   node tests/js/read_ui_stream.mjs < request.json
//
// request.json: {"url": "...", "method": "POST" | "GET", "headers": {...}, "body": {...}}.
// POST sends a turn as useChat would: DefaultChatTransport.sendMessages with a user message holding
// body.message, and prepareSendMessagesRequest turning it into our body ({"message", ...the rest of
// body}). GET reconnects: DefaultChatTransport.reconnectToStream, prepareReconnectToStreamRequest
// naming the URL. Either way readUIMessageStream builds the message from the chunks.
// Prints {"status": "message" | "no-stream", "message": UIMessage | null, "errors": [errorText, ...]}
// (no-stream: the server answered 204). Exits 1 with "<error name>: <message>" on stderr when the
// request is refused (the message is the response body) or a chunk fails the AI SDK's own schema.
import { DefaultChatTransport, readUIMessageStream } from "ai";

async function main() {
  const input = [];
  for await (const piece of process.stdin) input.push(piece);
  const request = JSON.parse(Buffer.concat(input).toString("utf8"));
  const { message: text, ...rest } = request.body ?? {};

  const transport = new DefaultChatTransport({
    api: request.url,
    headers: request.headers ?? {},
    body: rest,
    // Our POST body is {"message": <the user's text>, "prompt_version"?}, not the AI SDK's message list.
    prepareSendMessagesRequest: ({ messages, body, headers }) => ({
      body: { ...body, message: messages.at(-1).parts.map((part) => part.text ?? "").join("") },
      headers,
    }),
    prepareReconnectToStreamRequest: ({ headers }) => ({ api: request.url, headers }),
  });

  const stream =
    (request.method ?? "POST") === "GET"
      ? await transport.reconnectToStream({ chatId: "turn" })
      : await transport.sendMessages({
          chatId: "session",
          trigger: "submit-message",
          messageId: undefined,
          messages: [{ id: "user-1", role: "user", parts: [{ type: "text", text: text ?? "" }] }],
          abortSignal: undefined,
        });
  if (stream === null) return { status: "no-stream", message: null, errors: [] };

  const errors = [];
  let failed = null;
  let message = null;
  const onError = (error) => {
    // An `error` chunk reaches onError as a plain Error holding its errorText: the turn's failure.
    // Anything else (a chunk the schema refuses, a broken stream) fails the read.
    if (error instanceof Error && error.constructor === Error) errors.push(error.message);
    else failed = error;
  };
  for await (const snapshot of readUIMessageStream({ stream, onError })) message = snapshot;
  if (failed !== null) throw failed;
  return { status: "message", message, errors };
}

try {
  process.stdout.write(JSON.stringify(await main()) + "\n");
} catch (error) {
  process.stderr.write(`${error?.name}: ${error?.message}\n`);
  process.exit(1);
}
