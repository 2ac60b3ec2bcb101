// Drives `tempi --mode rpc` through pi 0.73.1's own RpcClient and prints what it got
// back as one JSON object. Usage: node drive_tempi.mjs <pi package dir> <export path>
import path from "node:path";
import { pathToFileURL } from "node:url";

const [piPackage, exportPath] = process.argv.slice(2);
const { RpcClient } = await import(pathToFileURL(path.join(piPackage, "dist/modes/rpc/rpc-client.js")).href);

const client = new RpcClient({
  cliPath: path.join(path.dirname(new URL(import.meta.url).pathname), "tempi_shim.mjs"),
  cwd: process.cwd(),
  provider: "mock",
  model: "mock-model",
});
await client.start();
const out = {};
try {
  const events = await client.promptAndWait("Create notes.txt", undefined, 90000);
  out.eventTypes = events.map((e) => e.type);
  out.agentEndMessages = events.at(-1).messages.map((m) => m.role);
  out.lastText = await client.getLastAssistantText();
  out.messages = (await client.getMessages()).map((m) => m.role);
  await client.setSessionName("interop run");
  out.state = await client.getState();
  out.stats = await client.getSessionStats();
  out.bash = await client.bash("cat notes.txt");
  out.forkMessages = (await client.getForkMessages()).map((m) => m.text);
  out.models = (await client.getAvailableModels()).map((m) => `${m.provider}/${m.id}`);
  out.export = await client.exportHtml(exportPath);
  out.unknownCommand = await client.send({ type: "no_such_command" });
} finally {
  out.stderr = client.getStderr();
  await client.stop();
}
process.stdout.write(JSON.stringify(out));
