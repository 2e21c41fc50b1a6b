// An independent host: the json-rpc-2.0 npm package drives steerable-sidecar over its pipes.
// Usage: node client.mjs PYTHON MODEL_BASE_URL ; prints one JSON summary line on stdout.
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { JSONRPCClient, JSONRPCServer, JSONRPCServerAndClient } from "json-rpc-2.0";

const [python, baseUrl] = process.argv.slice(2);
const child = spawn(python, ["-m", "steerable_agent_runtime.sidecar"], { stdio: ["pipe", "pipe", "pipe"] });
let stderr = "";
child.stderr.on("data", (d) => { stderr += d; });

const peer = new JSONRPCServerAndClient(
  new JSONRPCServer(),
  new JSONRPCClient(async (request) => { child.stdin.write(JSON.stringify(request) + "\n"); }),
);
const summary = { ready: null, chunks: [], toolCalls: [], done: null, invoked: [] };
let resolveReady, resolveDone;
const ready = new Promise((r) => { resolveReady = r; });
const done = new Promise((r) => { resolveDone = r; });
peer.addMethod("lifecycle.ready", (params) => { summary.ready = params; resolveReady(); });
peer.addMethod("stream.chunk", (params) => {
  if (params.delta !== undefined) summary.chunks.push(params.delta);
  if (params.toolCall) summary.toolCalls.push(params.toolCall.name);
});
peer.addMethod("stream.error", (params) => { summary.error = params; });
peer.addMethod("stream.done", (params) => { summary.done = params; resolveDone(); });
peer.addMethod("tool.invoke", ({ name, arguments: args, callId }) => {
  summary.invoked.push({ name, args, callId });
  return { success: true, data: { forecast: `sunny in ${args.city}` } };
});

createInterface({ input: child.stdout }).on("line", (line) => {
  peer.receiveAndSend(JSON.parse(line));
});

const timeout = setTimeout(() => { console.log(JSON.stringify({ timeout: true, stderr })); process.exit(2); }, 60000);
await ready;
summary.ping = await peer.request("system.ping", {});
summary.session = await peer.request("agent.session.create", { chatId: "node-chat", userId: "node" });
try {
  await peer.request("agent.session.get", { sessionId: "missing" });
} catch (error) {
  summary.notFound = { code: error.code, message: error.message, hint: error.data?.hint };
}
const tools = [{ type: "function", function: { name: "get_weather", description: "weather",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }];
summary.stream = await peer.request("agent.chat.stream", {
  chatId: "node-chat", sessionId: summary.session.sessionId, tools,
  messages: [{ role: "user", content: "weather in Lisbon?" }],
  provider: { kind: "openai_compat", model: "m", baseUrl },
});
await done;
summary.shutdown = await peer.request("system.shutdown", {});
child.on("exit", (code) => {
  clearTimeout(timeout);
  summary.exitCode = code;
  console.log(JSON.stringify(summary));
});
