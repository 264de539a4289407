// One whole ACP turn against an agent, with the protocol's TypeScript SDK
// (@agentclientprotocol/sdk from npm): a second client, independent of the
// Python SDK that `abhed acp` is built on.  Run by tests/cli/acp/test_acp_node.py:
//   node node_client.mjs SDK_DIR WORKSPACE PROMPT AGENT_COMMAND...
// It answers every permission request "allow once", prints one JSON line with
// what it saw, and exits 0.
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const [sdkDir, workspace, prompt, ...command] = process.argv.slice(2);
const entry = createRequire(sdkDir + "/package.json").resolve("@agentclientprotocol/sdk");
const acp = await import(pathToFileURL(entry).href);

const child = spawn(command[0], command.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
const updates = [];
const asked = [];
const app = acp.client()
  .onNotification("session/update", ({ params }) => { updates.push(params.update); })
  .onRequest("session/request_permission", ({ params }) => {
    asked.push({ title: params.toolCall.title, options: params.options.map((o) => o.optionId) });
    return { outcome: { outcome: "selected", optionId: "allow_once" } };
  });

const seen = await app.connectWith(stream, async (agent) => {
  const init = await agent.request("initialize", {
    protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {},
    clientInfo: { name: "abhed-tests-node", version: "1" },
  });
  const session = await agent.request("session/new", { cwd: workspace, mcpServers: [] });
  const done = await agent.request("session/prompt", {
    sessionId: session.sessionId, prompt: [{ type: "text", text: prompt }],
  });
  return { init, session, done };
});
child.stdin.end();
const code = await new Promise((resolve) => child.on("exit", resolve));
process.stdout.write(JSON.stringify({ ...seen, updates, asked, agentExit: code }) + "\n");
