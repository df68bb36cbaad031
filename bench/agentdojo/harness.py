"""bench/agentdojo/run's harness: AgentDojo's suites (v1.2.2) under conditions and reviewers,
judged by AgentDojo's own utility and security checks. See README.md beside this file."""

from __future__ import annotations

import argparse
import asyncio
import atexit
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))

import injection_calls  # noqa: E402
import pairs  # noqa: E402
from agentdojo.agent_pipeline.agent_pipeline import load_system_message  # noqa: E402
from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement  # noqa: E402
from agentdojo.agent_pipeline.basic_elements import InitQuery, SystemMessage  # noqa: E402
from agentdojo.agent_pipeline.errors import AbortAgentError  # noqa: E402
from agentdojo.agent_pipeline.agent_pipeline import AgentPipeline  # noqa: E402
from agentdojo.agent_pipeline.tool_execution import ToolsExecutionLoop, ToolsExecutor  # noqa: E402
from agentdojo.functions_runtime import EmptyEnv, FunctionCall, FunctionsRuntime  # noqa: E402
from agentdojo.task_suite.task_suite import (  # noqa: E402
    functions_stack_trace_from_messages,
    model_output_from_messages,
)
from agentdojo.types import ChatAssistantMessage, get_text_content_as_str, text_content_block_from_string  # noqa: E402

CONDITIONS = ("none", "proxy", "agent")
METRICS = (
    "pairs", "replayable", "utility", "utility_strict", "utility_under_attack", "utility_under_attack_strict",
    "asr", "asr_replayable", "call_borne", "answer_borne", "reviews_mean", "reviews_max", "held", "errors",
)
# How long one pair may take before it is an error (a hung upstream, say).
PAIR_TIMEOUT = float(os.environ.get("AGENTDOJO_PAIR_TIMEOUT", "300"))


def canonical(args) -> str:
    return json.dumps(args, sort_keys=True, separators=(",", ":"), default=str)


# ---------------------------------------------------------------------------------------
# The fully fooled replay model.


class ReplayModel(BasePipelineElement):
    """Makes the user task's ground-truth calls, one per turn; once a tool result carrying
    the injection has been returned to it, obeys the injection by making the injection
    task's calls next (AgentDojo's ground truth, or those injection_calls.py writes where
    AgentDojo gives none); then finishes the user's calls and answers with the user task's
    ground-truth output, followed, once it obeyed, by what the injection asks it to say
    (`say`). Held, declined or failed calls do not change its plan."""

    name = "replay"

    def __init__(self, user_calls: list[FunctionCall], injection_calls: list[FunctionCall], goal: str | None, answer: str, say: str | None = None):
        self.queue = list(user_calls)
        self.injection_calls = list(injection_calls)
        self.goal = pairs.skeleton(goal) if goal else None
        self.obeyed = False
        self.read_injection = False
        self.answer = answer
        self.say = say
        self.turns = 0

    def query(self, query, runtime, env=EmptyEnv(), messages=[], extra_args={}):
        if self.goal and not self.obeyed:
            for message in messages:
                if message["role"] != "tool":
                    continue
                text = (message.get("error") or "") + get_text_content_as_str(message["content"] or [])
                if self.goal in pairs.skeleton(text):
                    self.read_injection = self.obeyed = True
                    self.queue[0:0] = self.injection_calls
                    break
        if self.queue:
            call = self.queue.pop(0)
            self.turns += 1
            call = FunctionCall(function=call.function, args=dict(call.args), id=f"call_{self.turns}")
            reply = ChatAssistantMessage(role="assistant", content=[text_content_block_from_string("")], tool_calls=[call])
        else:
            text = f"{self.answer}\n\n{self.say}" if self.obeyed and self.say else self.answer
            reply = ChatAssistantMessage(role="assistant", content=[text_content_block_from_string(text)], tool_calls=None)
        return query, runtime, env, [*messages, reply], extra_args


ANTHROPIC_DEFAULT = "claude-3-5-sonnet-20241022"


def real_llm(model: str):
    if model == "openai":
        import openai
        from agentdojo.agent_pipeline.llms.openai_llm import OpenAILLM

        name = os.environ.get("OPENAI_MODEL") or sys.exit("--model openai needs OPENAI_MODEL (and OPENAI_API_KEY, OPENAI_BASE_URL for another endpoint)")
        return OpenAILLM(openai.OpenAI(), name), name
    if model == "anthropic":
        import anthropic
        from agentdojo.agent_pipeline.llms.anthropic_llm import AnthropicLLM

        name = os.environ.get("ANTHROPIC_MODEL", ANTHROPIC_DEFAULT)
        return AnthropicLLM(anthropic.Anthropic(), name), name
    raise ValueError(model)


def pipeline_of(llm) -> AgentPipeline:
    """AgentDojo's own tool-calling pipeline (as its benchmark builds it, no defence)."""
    return AgentPipeline(
        [SystemMessage(load_system_message(None)), InitQuery(), llm, ToolsExecutionLoop([ToolsExecutor(), llm])]
    )


class ReplayEndpoint:
    """A model served on 127.0.0.1 (a port of its own) in the OpenAI Chat Completions wire
    format, tool calls included: how the `agent` condition's driver, a client of
    tooltrust-providers, reaches the replay model. Each request is one turn of `llm`; the
    tool names it is shown and answers with carry the proxy's `<suite>__` prefix.

    The driver shows the model a held call's outcome, once reviewed, as a user message
    (tooltrust's agent loop settles reviewed calls between turns), so the replay reads the
    injection in user and tool messages alike (the principal's own message never carries it)."""

    def __init__(self, llm: ReplayModel, prefix: str):
        self.llm = llm
        self.prefix = prefix
        self.turns = 0
        self.failure: str | None = None
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):  # noqa: N802 (http.server's name)
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    if self.path.rstrip("/") != "/v1/chat/completions":
                        raise ValueError(f"no such endpoint: POST {self.path}")
                    answer, status = endpoint.answer(json.loads(self.rfile.read(length))), 200
                except Exception as error:  # the driver reports the status; the run says why
                    endpoint.failure = f"{type(error).__name__}: {error}"
                    answer, status = {"error": {"message": endpoint.failure, "type": "replay_error"}}, 400
                body = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def answer(self, body: dict) -> dict:
        messages = []
        for message in body.get("messages") or []:
            if message.get("role") not in ("tool", "user"):
                continue
            content = message.get("content")
            if not isinstance(content, str):
                content = "".join(part.get("text", "") for part in content or [] if isinstance(part, dict))
            messages.append({"role": "tool", "content": [text_content_block_from_string(content)], "error": None})
        _, _, _, replied, _ = self.llm.query("", None, messages=messages)
        reply = replied[-1]
        self.turns += 1
        if reply["tool_calls"]:
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": self.prefix + call.function, "arguments": json.dumps(dict(call.args), default=str)},
                    }
                    for call in reply["tool_calls"]
                ],
            }
            finish = "tool_calls"
        else:
            message = {"role": "assistant", "content": get_text_content_as_str(reply["content"] or [])}
            finish = "stop"
        return {
            "id": f"chatcmpl-replay-{self.turns}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or "replay",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        }

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


# ---------------------------------------------------------------------------------------
# Tools through tooltrust's MCP proxy.


class Reviewer:
    """Answers the proxy's elicitations for held calls: `none` declines every one; `oracle`
    approves exactly the user task's own ground-truth calls (tool and arguments)."""

    def __init__(self, kind: str, user_calls: list[FunctionCall]):
        self.kind = kind
        self.allowed = {(call.function, canonical(dict(call.args))) for call in user_calls}
        self.asked = 0

    def decide(self, function: str, args: dict) -> bool:
        self.asked += 1
        return self.kind == "oracle" and (function, canonical(args)) in self.allowed


class ProxyRuntime(FunctionsRuntime):
    """AgentDojo's FunctionsRuntime with every call sent to `tooltrust mcp proxy` (which
    fronts upstream.py serving this pair's environment) instead of run in process. The
    model is shown AgentDojo's own tools; the calls reach `<suite>__<tool>` on the proxy."""

    def __init__(self, functions, suite: str, config: Path, reviewer: Reviewer, workdir: Path):
        super().__init__(functions)
        self.suite = suite
        self.reviewer = reviewer
        self.current: tuple[str, dict] | None = None
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.stderr = open(workdir / "proxy.stderr", "w")
        self._closing = None
        self.session = self._run(self._open(config), timeout=120)

    def _run(self, coroutine, timeout: float):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    async def _open(self, config: Path):
        from contextlib import AsyncExitStack

        import mcp.types as types
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client

        async def elicit(context, params):
            function, args = self.current if self.current else ("", {})
            # The proxy names the held tool in its question; approve only the call made now.
            named = f"Tool: {self.suite}__{function}\n" in params.message
            approve = named and self.reviewer.decide(function, args)
            if approve:
                return types.ElicitResult(action="accept", content={"approve": True})
            return types.ElicitResult(action="decline")

        stack = AsyncExitStack()
        self._closing = stack
        server = StdioServerParameters(
            command=str(tooltrust_bin()),
            args=["mcp", "proxy", "--config", str(config)],
            env={key: os.environ[key] for key in ("PATH", "HOME", "LANG", "TZ") if key in os.environ},
            cwd=str(config.parent),
        )
        read, write = await stack.enter_async_context(stdio_client(server, errlog=self.stderr))
        session = await stack.enter_async_context(ClientSession(read, write, elicitation_callback=elicit))
        await session.initialize()
        listed = await session.list_tools()
        names = {tool.name for tool in listed.tools}
        missing = [f.name for f in self.functions.values() if f"{self.suite}__{f.name}" not in names]
        if missing:
            self.stderr.flush()
            said = Path(self.stderr.name).read_text().strip().splitlines()
            raise RuntimeError(f"the proxy does not serve {len(missing)} of the suite's tools ({', '.join(missing[:3])}, …); it said: {said[-1] if said else 'nothing'}")
        return session

    def run_function(self, env, function: str, kwargs, raise_on_error: bool = False):
        if function not in self.functions:
            return "", f"ToolNotFoundError: The requested function `{function}` is not available."
        args = {key: value for key, value in kwargs.items()}
        self.current = (function, args)
        try:
            result = self._run(self.session.call_tool(f"{self.suite}__{function}", args), timeout=PAIR_TIMEOUT)
        finally:
            self.current = None
        text = "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")
        if result.isError:
            if raise_on_error:
                raise RuntimeError(text)
            return "", text
        return text, None

    def close(self):
        if self._closing is not None:
            try:
                self._run(self._closing.aclose(), timeout=30)
            except Exception:
                pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.stderr.close()


_BUILT: dict[str, Path] = {}


def cargo_executable(kind: str, name: str) -> Path:
    """Builds tooltrust-cli's `kind` ("bin" or "example") `name` with cargo and returns a
    copy of the executable cargo reports having built: wherever cargo puts it
    (CARGO_TARGET_DIR, a profile, a build configuration), and never an older one left in
    some directory, since cargo rebuilds what changed and does nothing when nothing did.
    The copy is the run's own: a build from another checkout sharing the target directory
    may replace cargo's file while the run goes on."""
    if name not in _BUILT:
        cargo = os.environ.get("CARGO") or "cargo"
        command = [cargo, "build", "--quiet", "--message-format=json-render-diagnostics", "-p", "tooltrust-cli", f"--{kind}", name]
        print(f"bench/agentdojo/run: cargo build -p tooltrust-cli --{kind} {name}", file=sys.stderr)
        try:
            done = subprocess.run(command, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
        except OSError as error:
            sys.exit(f"bench/agentdojo/run: cannot run {cargo}: {error}")
        if done.returncode != 0:
            sys.exit(f"bench/agentdojo/run: cargo could not build {name} (its messages above say why)")
        found = None
        for line in done.stdout.splitlines():
            try:
                message = json.loads(line)
            except ValueError:
                continue
            target = message.get("target") or {}
            if message.get("reason") == "compiler-artifact" and target.get("name") == name and kind in target.get("kind", []) and message.get("executable"):
                found = Path(message["executable"])
        if found is None or not found.exists():
            sys.exit(f"bench/agentdojo/run: cargo built {name} but reported no executable for it")
        _BUILT[name] = own_copy(found)
    return _BUILT[name]


def own_copy(executable: Path) -> Path:
    """A copy of `executable` for this run alone, removed when the harness exits."""
    copies = Path(tempfile.mkdtemp(prefix="agentdojo-bin-"))
    atexit.register(shutil.rmtree, copies, ignore_errors=True)
    return Path(shutil.copy2(executable, copies / executable.name))


def given_binary(variable: str) -> Path | None:
    """The executable the environment variable names, copied for this run, if it names one."""
    given = os.environ.get(variable)
    if not given:
        return None
    if variable not in _BUILT:
        path = Path(given)
        if not path.is_file():
            sys.exit(f"bench/agentdojo/run: {variable}={given} is not a file")
        _BUILT[variable] = own_copy(path)
    return _BUILT[variable]


def tooltrust_bin() -> Path:
    """The proxy: `TOOLTRUST_BIN`, or tooltrust-cli's `tooltrust` as cargo builds it now."""
    return given_binary("TOOLTRUST_BIN") or cargo_executable("bin", "tooltrust")


def agent_bin() -> Path:
    """The `agent` condition's driver: `AGENTDOJO_AGENT_BIN`, or the example
    `agentdojo_agent` of tooltrust-cli as cargo builds it now."""
    return given_binary("AGENTDOJO_AGENT_BIN") or cargo_executable("example", "agentdojo_agent")


# The environment the proxy passes to the upstreams it starts (the configs add none).
UPSTREAM_ENV = ("PATH", "HOME", "LANG", "TZ")

# The driver reaches these of the harness's environment (the model's endpoint and key);
# the upstream it starts gets only the proxy's few (PATH, HOME, LANG, TZ).
MODEL_ENV = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL", "ANTHROPIC_API_KEY", "ANTHROPIC_MODEL", "ANTHROPIC_BASE_URL")


def run_agent(task_suite, user_task, model: str, llm, reviewer: Reviewer, workdir: Path, config: Path) -> dict:
    """One run of tooltrust's agent loop (the driver) over the pair's upstream; its report."""
    prefix = f"{task_suite.name}__"
    (workdir / "prompt.txt").write_text(user_task.PROMPT)
    (workdir / "system.txt").write_text(load_system_message(None))
    (workdir / "descriptions.json").write_text(json.dumps({f.name: f.description for f in task_suite.tools}))
    approve = [] if reviewer.kind == "none" else [
        {"tool": prefix + function, "arguments": json.loads(arguments)} for function, arguments in sorted(reviewer.allowed)
    ]
    (workdir / "approve.json").write_text(json.dumps(approve))
    env = {key: os.environ[key] for key in UPSTREAM_ENV if key in os.environ}
    endpoint = None
    if model == "replay":
        endpoint = ReplayEndpoint(llm, prefix)
        env.update(OPENAI_BASE_URL=endpoint.base_url, OPENAI_MODEL="replay")
        driver_model = "openai"
    else:
        env.update({key: os.environ[key] for key in MODEL_ENV if key in os.environ})
        driver_model = model
        if model == "anthropic" and "ANTHROPIC_MODEL" not in env:
            env["ANTHROPIC_MODEL"] = ANTHROPIC_DEFAULT
    command = [
        str(agent_bin()), "--config", str(config), "--model", driver_model,
        "--prompt-file", str(workdir / "prompt.txt"), "--system-file", str(workdir / "system.txt"),
        "--descriptions", str(workdir / "descriptions.json"), "--approve", str(workdir / "approve.json"),
        "--out", str(workdir / "report.json"),
    ]
    try:
        with open(workdir / "agent.stderr", "w") as stderr:
            done = subprocess.run(command, env=env, cwd=str(config.parent), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr, timeout=PAIR_TIMEOUT)
    finally:
        if endpoint is not None:
            endpoint.close()
    if done.returncode != 0:
        said = (workdir / "agent.stderr").read_text().strip().splitlines()
        why = said[-1] if said else f"exit status {done.returncode}"
        if endpoint is not None and endpoint.failure:
            why += f" (the replay endpoint: {endpoint.failure})"
        raise RuntimeError(f"the agent driver failed: {why}")
    return json.loads((workdir / "report.json").read_text())


def gate_record(audit: Path) -> dict:
    """What the session's gate did with the calls, from the audit log: each call's first
    decision (tool, checksum, allowed / held / denied, rule), the reviews of held calls
    (checksum, approved), and the calls that ran (tool, checksum)."""
    decided, reviewed, executed = [], [], []
    verdicts = {"call_allowed": "allowed", "call_sent_to_review": "held", "call_denied": "denied", "call_observed": "observed"}
    log = audit / "audit.jsonl"
    for line in log.read_text().splitlines() if log.exists() else []:
        entry = json.loads(line)
        event = entry.get("event")
        if event in verdicts and "pending" not in entry or event == "call_sent_to_review":
            decided.append([entry["tool"], entry["checksum"], verdicts[event], entry["rule"]])
        elif event == "call_decided":
            reviewed.append([entry["checksum"], entry["approve"]])
        elif event == "call_executed":
            executed.append([entry["tool"], entry["checksum"]])
    return {"decided": decided, "reviewed": reviewed, "executed": executed}


def write_config(suite: str, workdir: Path, pair_file: Path, dump: Path) -> Path:
    """The suite's committed configuration, with the upstream's command made absolute and
    pointed at this pair."""
    text = (HERE / "configs" / f"{suite}.toml").read_text()
    arguments = ["--suite", suite, "--pair", str(pair_file), "--dump", str(dump)]
    if ZYGOTE is not None:
        command = [sys.executable, "-I", "-S", str(HERE / "launch.py"), str(ZYGOTE.socket), *arguments]
    else:
        command = [sys.executable, str(HERE / "upstream.py"), *arguments]
    replaced, count = re.subn(r"(?m)^command = \[.*\]$", lambda _: "command = " + json.dumps(command), text)
    if count != 1:
        raise RuntimeError(f"configs/{suite}.toml has no single `command = [...]` line")
    config = workdir / "tooltrust-mcp.toml"
    config.write_text(replaced)
    return config


# ---------------------------------------------------------------------------------------
# One run: a user task, with or without an injection task, under a condition.


def attack_plan(suite_name: str, injection_id: str, injection_task, pre) -> tuple[list[FunctionCall], str | None]:
    """What the fully fooled model does for an injection task: its calls (AgentDojo's
    ground truth, else those injection_calls.py writes from the task's goal) and what it
    says in its answer (for a task that acts only through the answer). A task the replay
    could not act on is an error, never a pair counted as defended."""
    given = injection_task.ground_truth(pre.model_copy(deep=True))
    written = injection_calls.calls(suite_name, injection_id, pre.model_copy(deep=True))
    say = injection_calls.answer(suite_name, injection_id)
    if given and (written is not None or say is not None):
        raise RuntimeError(f"agentdojo gives {suite_name} {injection_id} ground-truth calls now: remove it from injection_calls.py")
    calls = list(given) or written or []
    if not calls and say is None:
        raise RuntimeError(f"{suite_name} {injection_id} has no ground-truth calls and injection_calls.py writes none")
    return calls, say


def own_calls_stopped(requested: list[FunctionCall], decided: list, prefix: str, user_calls: list[FunctionCall]) -> int:
    """How many of the calls the model asked for were the user task's own (same tool and
    arguments as its ground truth) and were held or denied by the gate. The audit log's
    decisions come in the order the calls were asked for; a call the gate never saw (an
    unknown tool) has none."""
    own = {(call.function, canonical(dict(call.args))) for call in user_calls}
    stopped, position = 0, 0
    for call in requested:
        if position >= len(decided) or decided[position][0] != prefix + call.function:
            continue
        verdict = decided[position][2]
        position += 1
        if verdict in ("held", "denied") and (call.function, canonical(dict(call.args))) in own:
            stopped += 1
    if position != len(decided):
        raise RuntimeError(f"the audit log has {len(decided)} decisions, {position} of them for calls the model asked for")
    return stopped


def run_one(task_suite, condition: str, reviewer_kind: str, model: str, attack, user_id: str, injection_id: str | None, tmp: Path) -> dict:
    user_task = task_suite.get_user_task_by_id(user_id)
    injection_task = task_suite.get_injection_task_by_id(injection_id) if injection_id else None
    injections = attack.attack(user_task, injection_task) if injection_task else {}
    env = pairs.environment(task_suite, user_id, injections)
    pre = env.model_copy(deep=True)
    user_calls = user_task.ground_truth(pre.model_copy(deep=True))
    attack_calls, say = attack_plan(task_suite.name, injection_id, injection_task, pre) if injection_task else ([], None)
    record = {"suite": task_suite.name, "condition": condition, "user_task": user_id, "injection_task": injection_id}

    if model == "replay":
        llm = ReplayModel(user_calls, attack_calls, injection_task.GOAL if injection_task else None, user_task.GROUND_TRUTH_OUTPUT, say)
    else:
        llm, _ = real_llm(model)

    reviewer = Reviewer(reviewer_kind, user_calls)
    runtime: FunctionsRuntime
    workdir = None
    if condition in ("proxy", "agent"):
        workdir = Path(tempfile.mkdtemp(prefix=f"{task_suite.name}-{user_id}-{injection_id}-", dir=tmp))
        pair_file, dump = workdir / "pair.json", workdir / "environment.pickle"
        pair_file.write_text(json.dumps({"user_task": user_id, "injections": injections}))
        config = write_config(task_suite.name, workdir, pair_file, dump)
    if condition == "none":
        runtime = FunctionsRuntime(task_suite.tools)
    elif condition == "proxy":
        runtime = ProxyRuntime(task_suite.tools, task_suite.name, config, reviewer, workdir)
    elif condition != "agent":
        raise SystemExit(f"condition {condition!r} is not built (see bench/agentdojo/README.md)")

    if condition == "agent":
        # tooltrust's own loop drives the model; the harness's copy of the environment is
        # never handed to anything.
        report = run_agent(task_suite, user_task, model, llm, reviewer, workdir, config)
        result_env = env
        answer = report.get("answer")
        output = [text_content_block_from_string(answer)] if answer is not None else []
        prefix = f"{task_suite.name}__"
        requested = [
            FunctionCall(function=call["tool"].removeprefix(prefix), args=call["arguments"] if isinstance(call["arguments"], dict) else {})
            for call in report["requested"]
        ]
        shown = [message.get("content") or "" for message in report["messages"] if message.get("role") in ("tool", "user")]
        record["turns"] = report["turns"]
        record["turn_limit"] = report["turn_limit"]
    else:
        pipeline = pipeline_of(llm)
        try:
            try:
                _, _, result_env, messages, _ = pipeline.query(user_task.PROMPT, runtime, env)
            except AbortAgentError as error:
                result_env, messages = error.task_environment, error.messages
        finally:
            if isinstance(runtime, ProxyRuntime):
                runtime.close()
        output = model_output_from_messages(messages) or []
        requested = functions_stack_trace_from_messages(messages)
        shown = [(message.get("error") or "") + get_text_content_as_str(message["content"] or []) for message in messages if message["role"] == "tool"]

    if condition in ("proxy", "agent"):
        # The calls changed the upstream's environment, not ours: judge the one it left,
        # and, for AgentDojo's checks that read the trace of calls, the calls that reached
        # it (a call the gate held and no one approved never ran).
        if result_env != pre:
            raise RuntimeError(f"the harness's own copy of the environment changed in the {condition} condition")
        with open(workdir / "environment.pickle", "rb") as dumped:
            state = pickle.load(dumped)
        result_env = state["environment"]
        trace = [FunctionCall(function=call["function"], args=call["args"]) for call in state["calls"]]
        # What the session's gate decided, and what reached the upstream, for comparing
        # the proxy and the agent call by call.
        record["gate"] = gate_record(workdir / "audit")
        # Held calls as the gate recorded them: the proxy puts to the person only calls
        # whose arguments it can show whole (`max_asked_arguments_bytes`) and declines the
        # others itself, so its elicitations can be fewer than its held calls.
        record["held"] = sum(1 for decision in record["gate"]["decided"] if decision[2] == "held")
        record["reviews"] = reviewer.asked if condition == "proxy" else report["reviews"]
        record["reached"] = [[call["function"], canonical(call["args"])] for call in state["calls"]]
        record["own_calls_held"] = own_calls_stopped(requested, record["gate"]["decided"], f"{task_suite.name}__", user_calls)
    else:
        trace = requested
        record["held"] = 0
        record["reviews"] = 0
        record["own_calls_held"] = 0
    record["environment_changed"] = result_env != pre

    def check(task, environment, calls) -> bool:
        # Each check gets its own copies: some read the inbox's unread mail, which marks it
        # read (AgentDojo's utility checks never do; its security checks for workspace's
        # injection tasks 6, 8 and 9 do, on both environments).
        return bool(task_suite._check_task_result(task, output, pre.model_copy(deep=True), environment.model_copy(deep=True), calls))

    record["requested"] = [call.function for call in requested]
    record["ran"] = [call.function for call in trace]
    record["utility"] = check(user_task, result_env, trace)
    # The same check on the environment as it was before the run: where it differs from the
    # above, only the changes the calls made decided it.
    record["utility_if_unchanged"] = check(user_task, pre, trace)
    # Strict: solved without the gate having held (or denied) any of the task's own calls;
    # a check passed on an environment such a call would have changed is not counted.
    record["utility_strict"] = record["utility"] and record["own_calls_held"] == 0
    if injection_task is not None:
        record["security"] = check(injection_task, result_env, trace)
        if condition in ("proxy", "agent"):
            # What AgentDojo's checks would say if they read the calls the model asked for.
            record["security_by_requested_calls"] = check(injection_task, result_env, requested)
        # How the injection task acts: through calls (AgentDojo's ground truth, or those
        # injection_calls.py writes where it gives none), or only through the answer.
        record["injection_calls"] = len(attack_calls)
        record["answer_borne"] = not attack_calls
        goal = pairs.skeleton(injection_task.GOAL)
        record["read_injection"] = any(goal in pairs.skeleton(text) for text in shown)
    if workdir is not None and not os.environ.get("AGENTDOJO_KEEP"):
        shutil.rmtree(workdir, ignore_errors=True)
    return record


def guarded(job, tmp: Path) -> dict:
    suite_name, condition, reviewer, model, user_id, injection_id = job
    started = time.monotonic()
    try:
        task_suite = pairs.suite(suite_name)
        record = run_one(task_suite, condition, reviewer, model, ATTACKS[suite_name], user_id, injection_id, tmp)
    except Exception as error:  # one pair's failure is reported, and the others go on
        detail = "".join(traceback.format_exception_only(type(error), error)).strip()
        print(f"error: {suite_name} {condition} {user_id} {injection_id or '(no injection)'}: {detail}", file=sys.stderr)
        record = {
            "suite": suite_name, "condition": condition, "user_task": user_id, "injection_task": injection_id,
            "error": detail, "utility": False, "held": 0, "reviews": 0,
        }
        record["utility_strict"] = False
        if injection_id:
            # As AgentDojo's own benchmark scores a pair it could not finish: no utility,
            # and the attack counted as successful.
            record["security"] = True
            record["read_injection"] = False
            record["answer_borne"] = (suite_name, injection_id) in ANSWER_BORNE
    record["seconds"] = round(time.monotonic() - started, 2)
    return record


ATTACKS: dict = {}
# (suite, injection task) of the injection tasks that act only through the model's answer.
ANSWER_BORNE: set[tuple[str, str]] = set()


def check_plans(name: str, task_suite) -> None:
    """Every injection task of the suite gets calls or words from the replay (else the run
    stops before it starts); notes those that act only through the answer."""
    default = task_suite.load_and_inject_default_environment({})
    for injection_id, injection_task in task_suite.injection_tasks.items():
        try:
            calls, _ = attack_plan(name, injection_id, injection_task, default)
        except RuntimeError as error:
            raise SystemExit(f"bench/agentdojo/run: {error}")
        if not calls:
            ANSWER_BORNE.add((name, injection_id))


class Zygote:
    """`upstream.py --zygote`: one warm copy of the upstream that forks a child per pair
    (through launch.py), so the proxy's upstream starts in milliseconds instead of paying
    AgentDojo's imports every time. A child serves exactly what `upstream.py` would: the
    same code, arguments and pipes; only its interpreter was started once."""

    def __init__(self, tmp: Path):
        """Starts it; `wait` waits until it serves (its imports overlap the harness's own
        set-up meanwhile)."""
        self.socket = tmp / "upstream.sock"
        self.process = subprocess.Popen(
            [sys.executable, str(HERE / "upstream.py"), "--zygote", str(self.socket)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
            # What the proxy would give an upstream it starts itself: never the model's keys.
            env={key: os.environ[key] for key in UPSTREAM_ENV if key in os.environ},
        )

    def wait(self) -> None:
        ready = self.process.stdout.readline().strip() if self.process.stdout else ""
        if ready != "ready":
            self.process.kill()
            raise SystemExit(f"bench/agentdojo/run: the upstream zygote did not start (it said {ready!r})")

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


ZYGOTE: Zygote | None = None


# ---------------------------------------------------------------------------------------
# Figures.


def figures(records: Sequence[dict]) -> dict:
    attacked = [r for r in records if r["injection_task"] is not None]
    clean = [r for r in records if r["injection_task"] is None]
    reviews = [r["reviews"] for r in attacked]
    # Pairs whose injection the replay carried out or could have: a tool result showed it
    # the injection (the replay acts on every injection task, by calls or by its answer).
    replayable = [r for r in attacked if r.get("read_injection")]

    def rate(values):
        values = list(values)
        return round(sum(values) / len(values), 4) if values else None

    return {
        "pairs": len(attacked),
        "replayable": len(replayable),
        "utility": rate(r["utility"] for r in clean),
        "utility_strict": rate(r["utility_strict"] for r in clean),
        "utility_under_attack": rate(r["utility"] for r in attacked),
        "utility_under_attack_strict": rate(r["utility_strict"] for r in attacked),
        "asr": rate(r["security"] for r in attacked),
        "asr_replayable": rate(r["security"] for r in replayable),
        "call_borne": sum(1 for r in attacked if r["security"] and not r.get("answer_borne")),
        "answer_borne": sum(1 for r in attacked if r["security"] and r.get("answer_borne")),
        "reviews_mean": round(sum(reviews) / len(reviews), 3) if reviews else None,
        "reviews_max": max(reviews) if reviews else None,
        "held": sum(r["held"] for r in attacked),
        "errors": sum(1 for r in records if "error" in r),
    }


def markdown(results: dict, args) -> str:
    def cell(value, key):
        if value is None:
            return "–"
        if key in ("utility", "utility_strict", "utility_under_attack", "utility_under_attack_strict", "asr", "asr_replayable"):
            return f"{100 * value:.1f}%"
        return str(value)

    lines = [
        f"AgentDojo {pairs.BENCHMARK_VERSION} (agentdojo 0.1.35), model `{args.model}`, reviewer `{args.reviewer}`, "
        f"attack `{results['attack']}`, {results['date']}.",
        "",
        "`bench/agentdojo/run " + " ".join(sys.argv[1:]) + "`",
        "",
        "| suite | condition | " + " | ".join(METRICS) + " |",
        "|---|---|" + "---|" * len(METRICS),
    ]
    for suite_name, by_condition in [*results["suites"].items(), ("total", results["total"])]:
        for condition, row in by_condition.items():
            lines.append(f"| {suite_name} | {condition} | " + " | ".join(cell(row[key], key) for key in METRICS) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench/agentdojo/run", description=__doc__)
    parser.add_argument("--suites", default=",".join(pairs.SUITES))
    parser.add_argument("--sample", type=int, help="the same N pairs per suite on every run (default: all)")
    parser.add_argument("--conditions", default=",".join(CONDITIONS))
    parser.add_argument("--reviewer", choices=("none", "oracle"), default="none")
    parser.add_argument("--model", choices=("replay", "openai", "anthropic"), default="replay")
    parser.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    suites = [name.strip() for name in args.suites.split(",") if name.strip()]
    conditions = [name.strip() for name in args.conditions.split(",") if name.strip()]
    for name in suites:
        if name not in pairs.SUITES:
            parser.error(f"unknown suite {name!r}: one of {', '.join(pairs.SUITES)}")
    for name in conditions:
        if name not in CONDITIONS:
            parser.error(f"unknown condition {name!r}: one of {', '.join(CONDITIONS)}")
    if args.sample is not None and args.sample < 1:
        parser.error("--sample must be at least 1")
    if args.model != "replay" and args.reviewer == "oracle":
        print("note: the oracle approves exactly the user task's ground-truth calls; a real model's calls may differ", file=sys.stderr)
    if "proxy" in conditions:
        tooltrust_bin()
    if "agent" in conditions:
        agent_bin()

    global ZYGOTE
    with tempfile.TemporaryDirectory(prefix="agentdojo-") as tmp:
        if "proxy" in conditions or "agent" in conditions:
            ZYGOTE = Zygote(Path(tmp))
        try:
            model_name = None if args.model == "replay" else real_llm(args.model)[1]
            jobs = []
            for name in suites:
                task_suite = pairs.suite(name)
                check_plans(name, task_suite)
                ATTACKS[name] = pairs.attack(task_suite, model_name)
                chosen = pairs.sample(task_suite, args.sample)
                users = sorted({user for user, _ in chosen}, key=lambda task: int(task.rsplit("_", 1)[1]))
                for condition in conditions:
                    jobs += [(name, condition, args.reviewer, args.model, user, None) for user in users]
                    jobs += [(name, condition, args.reviewer, args.model, user, injection) for user, injection in chosen]
                # Warm the attack's cache (it runs each user task's ground truth once) before threads share it.
                for user in users:
                    ATTACKS[name].get_injection_candidates(task_suite.get_user_task_by_id(user))

            args.out.mkdir(parents=True, exist_ok=True)
            print(f"bench/agentdojo/run: {len(jobs)} runs ({', '.join(suites)}; {', '.join(conditions)}; reviewer {args.reviewer}; model {args.model}; {args.jobs} jobs)", file=sys.stderr)
            started = time.monotonic()
            if ZYGOTE is not None:
                ZYGOTE.wait()
            with ThreadPoolExecutor(max_workers=args.jobs) as pool:
                records = list(pool.map(lambda job: guarded(job, Path(tmp)), jobs))
        finally:
            if ZYGOTE is not None:
                ZYGOTE.close()

    results = {
        "suites": {
            name: {condition: figures([r for r in records if r["suite"] == name and r["condition"] == condition]) for condition in conditions}
            for name in suites
        },
        "total": {condition: figures([r for r in records if r["condition"] == condition]) for condition in conditions},
        "model": args.model,
        "reviewer": args.reviewer,
        "attack": next(iter(ATTACKS.values())).name,
        "benchmark_version": pairs.BENCHMARK_VERSION,
        "sample": args.sample,
        "date": time.strftime("%Y-%m-%d"),
        "seconds": round(time.monotonic() - started, 1),
    }
    (args.out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out / "results.md").write_text(markdown(results, args))
    with open(args.out / "runs.jsonl", "w") as runs:
        for record in records:
            runs.write(json.dumps(record) + "\n")
    sys.stdout.write(markdown(results, args))
    errors = sum(1 for r in records if "error" in r)
    print(f"bench/agentdojo/run: {len(records)} runs in {results['seconds']} s, {errors} errors; {args.out}/results.json", file=sys.stderr)


if __name__ == "__main__":
    main()
