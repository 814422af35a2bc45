"""vLLM offline batch: every prompt of a run in one ``LLM.chat`` call, each decoded against its schema.

The model loads once per process. vLLM needs a GPU; on a machine without one (or without the
``[vllm]`` extra) the backend refuses to start with the reason. Tests drive this same class with a
stand-in for ``vllm.LLM`` and its parameter classes (tests/stand_in_vllm.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from seem_dagster.config import LlmConfig
from seem_dagster.llm.engine import ChatReply, ChatRequest, EngineError


@dataclass(frozen=True)
class VllmApi:
    """The three names this engine uses from vllm 0.33."""

    LLM: Any
    SamplingParams: Any
    StructuredOutputsParams: Any


def vllm_api() -> VllmApi:
    try:
        from vllm import LLM, SamplingParams
        from vllm.sampling_params import StructuredOutputsParams
    except ImportError as err:
        raise EngineError(f"the vllm backend needs `pip install -e '.[vllm]'` on a machine with a CUDA GPU ({err})") from err
    return VllmApi(LLM, SamplingParams, StructuredOutputsParams)


class VllmEngine:
    backend = "vllm"

    def __init__(self, settings: LlmConfig, api: VllmApi | None = None):
        self.settings = settings
        self.model = settings.model
        self.api = api or vllm_api()
        self.llm = self.api.LLM(model=settings.model, tensor_parallel_size=settings.tensor_parallel_size,
                                max_model_len=settings.max_model_len)

    def complete(self, requests: Sequence[ChatRequest]) -> list[ChatReply]:
        if not requests:
            return []
        params = [
            self.api.SamplingParams(
                temperature=self.settings.temperature, max_tokens=r.max_tokens,
                structured_outputs=self.api.StructuredOutputsParams(json=r.schema),
            )
            for r in requests
        ]
        outputs = self.llm.chat([list(r.messages) for r in requests], sampling_params=params, use_tqdm=False)
        if len(outputs) != len(requests):
            raise EngineError(f"vllm returned {len(outputs)} outputs for {len(requests)} prompts")
        replies = []
        for request, out in zip(requests, outputs):
            if not out.outputs:
                replies.append(ChatReply(request.key, None, error="vllm returned no completion"))
                continue
            completion = out.outputs[0]
            replies.append(ChatReply(request.key, completion.text, len(out.prompt_token_ids or []), len(completion.token_ids or [])))
        return replies
