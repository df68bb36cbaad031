"""An MCP server (the official Python SDK, stdio) that serves one AgentDojo suite's tools over
one environment: AgentDojo's own tool names, descriptions and input schemas, run by
AgentDojo's own FunctionsRuntime and formatted by its own `tool_result_to_str`, so a model
reads through MCP exactly what AgentDojo's pipeline would show it.

    python upstream.py --suite banking                       # the suite's default environment
    python upstream.py --suite banking --pair PAIR.json --dump ENV.json
    python upstream.py --zygote SOCKET      # forks of this process, for launch.py SOCKET ...

With --pair (a JSON file: {"user_task": ID, "injections": {vector: text}}) it serves that
pair's injected environment; with --dump it writes the environment (AgentDojo's pydantic
model, pickled: its JSON does not round-trip, a calendar rebuilds its events from the initial
ones) and the calls that reached it to that file at start and after every call, so the
harness can judge the state the calls actually left, and the calls actually made, with
AgentDojo's own utility and security checks, even if this process is killed rather than
shut down.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pickle
import signal
import socket
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import mcp.server.stdio  # noqa: E402
import mcp.types as types  # noqa: E402
from mcp.server.lowlevel import Server  # noqa: E402

from agentdojo.agent_pipeline.tool_execution import tool_result_to_str  # noqa: E402
from agentdojo.functions_runtime import FunctionsRuntime  # noqa: E402

import pairs  # noqa: E402


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", choices=pairs.SUITES)
    parser.add_argument("--pair", type=Path, help="the pair to serve (JSON)")
    parser.add_argument("--dump", type=Path, help="where to write the environment")
    parser.add_argument("--zygote", type=Path, help="serve forks of this process on this Unix socket (see launch.py)")
    return parser


def main() -> None:
    parser = arguments()
    args = parser.parse_args()
    if args.zygote is not None:
        zygote(args.zygote)
    elif args.suite is None:
        parser.error("--suite is required")
    else:
        serve(args)


def zygote(path: Path) -> None:
    """Forks a copy of this process, AgentDojo already imported, for each launch.py that
    connects to `path`: the child takes the launcher's stdin, stdout and stderr and serves
    the launcher's arguments. Importing AgentDojo (it imports every model provider's SDK)
    costs seconds of CPU, which a fresh interpreter per pair paid again each time."""
    for name in pairs.SUITES:
        pairs.suite(name)
    # Children are reaped by the kernel; each reports its own exit to its launcher.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(64)
    print("ready", flush=True)
    sys.stderr.flush()
    while True:
        connection, _ = listener.accept()
        try:
            message, fds, _, _ = socket.recv_fds(connection, 1 << 16, 3)
        except OSError:
            connection.close()
            continue
        if len(fds) != 3:
            for fd in fds:
                os.close(fd)
            connection.close()
            continue
        pid = os.fork()
        if pid == 0:
            listener.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            code = 1
            try:
                for target, fd in enumerate(fds):
                    os.dup2(fd, target)
                    os.close(fd)
                connection.sendall(f"pid {os.getpid()}\n".encode())
                serve(arguments().parse_args(json.loads(message)))
                code = 0
            except SystemExit as exit:
                code = exit.code if isinstance(exit.code, int) else 1
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                try:
                    connection.sendall(f"exit {code}\n".encode())
                finally:
                    os._exit(code)
        for fd in fds:
            os.close(fd)
        connection.close()


def serve(args: argparse.Namespace) -> None:
    task_suite = pairs.suite(args.suite)
    if args.pair is not None:
        pair = json.loads(args.pair.read_text())
        env = pairs.environment(task_suite, pair["user_task"], pair.get("injections") or {})
    else:
        env = task_suite.load_and_inject_default_environment({})
    runtime = FunctionsRuntime(task_suite.tools)
    calls: list[dict] = []

    def dump() -> None:
        if args.dump is None:
            return
        partial = args.dump.with_suffix(".partial")
        partial.write_bytes(pickle.dumps({"environment": env, "calls": calls}))
        os.replace(partial, args.dump)

    dump()
    server = Server(f"agentdojo-{args.suite}")

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return [
            types.Tool(name=f.name, description=f.description, inputSchema=f.parameters.model_json_schema())
            for f in task_suite.tools
        ]

    # AgentDojo validates arguments itself (its pydantic input model), and says why in the
    # error the model reads; the SDK's own check would answer differently.
    @server.call_tool(validate_input=False)
    async def call_tool(name: str, arguments: dict) -> types.CallToolResult:
        calls.append({"function": name, "args": dict(arguments or {})})
        result, error = runtime.run_function(env, name, arguments or {})
        dump()
        if error is not None:
            # AgentDojo's pipelines show the model the error instead of the (empty) result.
            return types.CallToolResult(content=[types.TextContent(type="text", text=error)], isError=True)
        text = tool_result_to_str(result)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], isError=False)

    async def run() -> None:
        async with mcp.server.stdio.stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    asyncio.run(run())


if __name__ == "__main__":
    main()
