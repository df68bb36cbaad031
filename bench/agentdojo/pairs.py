"""What the harness and the MCP upstream share: AgentDojo's suites (v1.2.2), the attack, and
how one pair's injected environment is built. Everything comes from the installed agentdojo
package; nothing of its data lives in this repository."""

from __future__ import annotations

import random
import re

from agentdojo.attacks.base_attacks import DEFAULT_MODEL_NAME, FixedJailbreakAttack
from agentdojo.attacks.important_instructions_attacks import ImportantInstructionsAttack
from agentdojo.task_suite.load_suites import get_suite

BENCHMARK_VERSION = "v1.2.2"
SUITES = ("workspace", "travel", "banking", "slack")


def suite(name: str):
    if name not in SUITES:
        raise SystemExit(f"unknown suite {name!r}: one of {', '.join(SUITES)}")
    return get_suite(BENCHMARK_VERSION, name)


class _Named:
    def __init__(self, name: str) -> None:
        self.name = name


def attack(task_suite, model_name: str | None):
    """AgentDojo's `important_instructions` attack (the one its papers report), addressed to
    `model_name` as AgentDojo names it when it knows the model, else to "the AI language
    model" (its `important_instructions_no_model_name`), signed by the suite's user."""
    try:
        if model_name is None:
            raise ValueError
        return ImportantInstructionsAttack(task_suite, _Named(model_name))
    except ValueError:
        chosen = ImportantInstructionsAttack.__new__(ImportantInstructionsAttack)
        FixedJailbreakAttack.__init__(chosen, ImportantInstructionsAttack._JB_STRING, task_suite, _Named("replay"))
        chosen.user_name = "Emma Johnson"
        chosen.model_name = DEFAULT_MODEL_NAME
        chosen.name = "important_instructions_no_model_name"
        return chosen


def all_pairs(task_suite) -> list[tuple[str, str]]:
    def number(task_id: str) -> int:
        return int(task_id.rsplit("_", 1)[1])

    users = sorted(task_suite.user_tasks, key=number)
    injections = sorted(task_suite.injection_tasks, key=number)
    return [(user, injection) for user in users for injection in injections]


def sample(task_suite, n: int | None) -> list[tuple[str, str]]:
    """The same `n` pairs of the suite on every run and every machine, in suite order; all of
    them when `n` is None. The pairs are shuffled (seeded by the suite's name) and then dealt
    in rounds, one pair per injection task per round, so a sample spreads over the injection
    tasks as evenly as its size allows."""
    pairs = all_pairs(task_suite)
    if n is None or n >= len(pairs):
        return pairs
    shuffled = list(pairs)
    random.Random(f"tooltrust-agentdojo-{task_suite.name}").shuffle(shuffled)
    seen: dict[str, int] = {}
    rounds = []
    for position, (user, injection) in enumerate(shuffled):
        rounds.append((seen.get(injection, 0), position, (user, injection)))
        seen[injection] = seen.get(injection, 0) + 1
    keep = {pair for _, _, pair in sorted(rounds)[:n]}
    return [pair for pair in pairs if pair in keep]


def environment(task_suite, user_task_id: str, injections: dict[str, str]):
    """The environment a pair runs in, as AgentDojo's `run_task_with_pipeline` builds it:
    the suite's environment with the injections in place, then the user task's own set-up."""
    user_task = task_suite.get_user_task_by_id(user_task_id)
    return user_task.init_environment(task_suite.load_and_inject_default_environment(injections))


def skeleton(text: str) -> str:
    """Letters and digits only, lower-cased: how the replay model recognises a sentence
    whatever quoting, folding or enveloping a tool result put around it. Escaped line
    breaks and tabs (YAML's double-quoted strings write a goal's newline as `\\n`) are
    spaces first, or their letter would join the words around them."""
    return re.sub(r"[^0-9a-z]", "", re.sub(r"\\[nrt]", " ", text).lower())
