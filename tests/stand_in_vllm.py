"""TEST DOUBLE: a stand-in for ``vllm.LLM`` and its parameter classes (vLLM needs a CUDA GPU).

It records every ``chat`` call and answers each prompt with a scripted function of the prompt's
last user message, so the production VllmEngine code path (batching, parameters, parsing) runs
unchanged. Nothing here is a language model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from seem_dagster.llm.vllm_batch import VllmApi


@dataclass
class StandInStructuredOutputsParams:
    json: dict | None = None


@dataclass
class StandInSamplingParams:
    temperature: float = 1.0
    max_tokens: int = 16
    structured_outputs: StandInStructuredOutputsParams | None = None


@dataclass
class _Completion:
    text: str
    token_ids: list[int]


@dataclass
class _RequestOutput:
    prompt_token_ids: list[int]
    outputs: list[_Completion]


@dataclass
class StandInLLM:
    """``script(messages) -> reply text``; ``calls`` keeps (messages list, sampling params list) per chat call."""

    model: str
    script: object = None
    calls: list = field(default_factory=list)
    init_kwargs: dict = field(default_factory=dict)

    def chat(self, messages, sampling_params=None, use_tqdm=True):
        self.calls.append((messages, sampling_params))
        out = []
        for convo in messages:
            text = self.script(convo)
            out.append(_RequestOutput(prompt_token_ids=list(range(sum(len(m["content"]) // 4 for m in convo))),
                                      outputs=[_Completion(text, list(range(max(1, len(text) // 4))))]))
        return out


def stand_in_api(script) -> tuple[VllmApi, list[StandInLLM]]:
    made: list[StandInLLM] = []

    def factory(model, **kwargs):
        llm = StandInLLM(model, script, init_kwargs=kwargs)
        made.append(llm)
        return llm

    return VllmApi(factory, StandInSamplingParams, StandInStructuredOutputsParams), made


def data_of(convo) -> dict:
    """The JSON data document of a prompt (what the production prompt put after 'Data:')."""
    first_user = next(m for m in convo if m["role"] == "user")
    return json.loads(first_user["content"].rsplit("Data:\n", 1)[1])
