"""The reference MCP client (PyPI's `mcp`) against `hammock mcp CONFIG`; exits non-zero with the reason."""

import asyncio
import json
import os
import subprocess
import sys
import time

import mcp.types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import McpError

HAMMOCK, CONFIG = sys.argv[1], sys.argv[2]


def text_of(result):
    assert not result.isError, result
    return json.loads(result.content[0].text)


async def main():
    updates = []
    list_changes = []

    async def on_message(message):
        if isinstance(message, types.ServerNotification) and isinstance(message.root, types.ResourceUpdatedNotification):
            updates.append((time.monotonic(), str(message.root.params.uri)))
        if isinstance(message, types.ServerNotification) and isinstance(message.root, types.ResourceListChangedNotification):
            list_changes.append(time.monotonic())

    server = StdioServerParameters(command=HAMMOCK, args=["mcp", CONFIG], env=dict(os.environ))
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write, message_handler=on_message) as session:
            hello = await session.initialize()
            assert hello.serverInfo.name == "hammock", hello
            assert hello.capabilities.resources and hello.capabilities.resources.subscribe, hello.capabilities

            listed = (await session.list_resources()).resources
            uris = [str(resource.uri) for resource in listed]
            assert uris == ["hammock://source/n", "hammock://source/ticking", "hammock://view/both"], uris
            described = {str(resource.uri): resource.description for resource in listed}
            assert "kind fake" in described["hammock://source/n"], described
            assert "kind shell, refreshed every 20ms" in described["hammock://source/ticking"], described
            assert "merges n, ticking" in described["hammock://view/both"], described

            # The engine was started for this client: its first load may still be on its way.
            deadline = time.monotonic() + 10
            while True:
                line = json.loads((await session.read_resource("hammock://source/n")).contents[0].text)
                assert line["type"] == "source" and line["id"] == "n", line
                if line["state"]["content"] == 1:
                    break
                assert time.monotonic() < deadline, line
                await asyncio.sleep(0.05)
            try:
                await session.read_resource("hammock://source/nope")
                raise AssertionError("an unknown resource was read")
            except McpError as error:
                assert "no such resource" in str(error), error

            # Subscribed: an override through the tool is told as an update of that resource.
            await session.subscribe_resource("hammock://source/n")
            answer = text_of(await session.call_tool("override", {"source": "n", "content": {"set": "by agent"}}))
            assert answer["sources"]["n"]["state"]["content"] == {"set": "by agent"}, answer
            deadline = time.monotonic() + 10
            while not any(uri == "hammock://source/n" for _, uri in updates):
                assert time.monotonic() < deadline, f"no update for hammock://source/n: {updates}"
                await asyncio.sleep(0.05)
            again = json.loads((await session.read_resource("hammock://source/n")).contents[0].text)
            assert again["state"]["content"] == {"set": "by agent"}, again

            # The tools: each answers after hammock's ack with the states it touched.
            loaded = text_of(await session.call_tool("load", {"source": "n"}))
            assert loaded["sources"]["n"]["id"] == "n", loaded
            got = text_of(await session.call_tool("get", {"sources": ["n"], "views": ["both"]}))
            assert set(got) == {"sources", "views"} and got["views"]["both"]["type"] == "view", got
            everything = text_of(await session.call_tool("get", {}))
            assert set(everything["sources"]) == {"n", "ticking"}, everything
            for name, arguments in [("retry", {"view": "both"}), ("loadIfNeeded", {"source": "n"}), ("wipe", {"source": "n"})]:
                text_of(await session.call_tool(name, arguments))
            refused = await session.call_tool("load", {"source": "nope"})
            assert refused.isError and "nope" in refused.content[0].text, refused
            unknown_tool = await session.call_tool("fly", {})
            assert unknown_tool.isError and "no tool fly" in unknown_tool.content[0].text, unknown_tool
            tools = {tool.name for tool in (await session.list_tools()).tools}
            assert tools == {"get", "load", "loadIfNeeded", "retry", "override", "wipe", "more"}, tools
            # more on a source that is not paginated: hammock's refusal, as the tool's error.
            no_more = await session.call_tool("more", {"source": "n"})
            assert no_more.isError and "has no more pages" in no_more.content[0].text, no_more

            # Coalesced: a source that changes 50 times a second is told a few times a second, not 50.
            await session.subscribe_resource("hammock://source/ticking")
            await asyncio.sleep(0.3)
            start = time.monotonic()
            await asyncio.sleep(2)
            ticks = [at for at, uri in updates if uri == "hammock://source/ticking" and start <= at <= start + 2]
            assert 2 <= len(ticks) <= 10, f"{len(ticks)} updates of a source polled every 20 ms in 2 s"
            await session.unsubscribe_resource("hammock://source/ticking")

            # A reload that adds a source: the list changed, and the new resource is there.
            with open(CONFIG) as file:
                text = file.read()
            with open(CONFIG, "w") as file:
                file.write(text.replace("views:", "  extra: { kind: fake, content: 3 }\nviews:"))
            reloaded = subprocess.run([HAMMOCK, "ctl", CONFIG, '{"op":"reload"}'], capture_output=True, text=True, timeout=30)
            assert reloaded.returncode == 0, reloaded
            deadline = time.monotonic() + 10
            while not list_changes:
                assert time.monotonic() < deadline, "no notifications/resources/list_changed after a reload"
                await asyncio.sleep(0.05)
            uris = [str(resource.uri) for resource in (await session.list_resources()).resources]
            assert "hammock://source/extra" in uris, uris
    print(f"mcp: resources listed and read, an override told as an update, tools answered, "
          f"{len(ticks)} updates in 2 s of a 50/s source")


def malformed():
    """Raw JSON-RPC on stdin: garbage gets a parse error, an unknown method its own error; the server goes on."""
    process = subprocess.Popen([HAMMOCK, "mcp", CONFIG], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL)
    requests = [
        b"{this is not json\n",
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}).encode() + b"\n",
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode() + b"\n",
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "no/such/method"}).encode() + b"\n",
        json.dumps({"jsonrpc": "2.0", "id": 3, "method": "resources/list"}).encode() + b"\n",
    ]
    for request in requests:
        process.stdin.write(request)
        process.stdin.flush()
    answers = {}
    parse_errors = []
    deadline = time.monotonic() + 20
    while 3 not in answers:
        assert time.monotonic() < deadline, f"answers so far: {answers}"
        raw = process.stdout.readline()
        assert raw, f"hammock mcp closed its stdout; answers so far: {answers}"
        message = json.loads(raw)
        if message.get("error", {}).get("code") == -32700:
            parse_errors.append(message)  # the SDK gives it an id of its own, where JSON-RPC says null
        else:
            answers[message.get("id")] = message
    process.stdin.close()
    process.wait(timeout=20)
    assert len(parse_errors) == 1, parse_errors
    assert answers[2]["error"]["code"] == -32601, answers     # method not found
    assert len(answers[3]["result"]["resources"]) == 4, answers  # after the reload above: extra too
    print("mcp: malformed JSON-RPC and an unknown method got their errors; the server went on")


asyncio.run(main())
malformed()
