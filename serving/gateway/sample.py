"""What vLLM produced for one completion, as the gateway records it (text, token ids and
logprobs) and charges it (usage).
"""

import logging
from dataclasses import dataclass

from tenants.recording import SampledTokens

log = logging.getLogger(__name__)


@dataclass
class Sample:
    """What vLLM produced, gathered from a response or from stream chunks."""

    text: str = ""
    prompt_ids: list[int] | None = None
    completion_ids: list[int] | None = None
    logprobs: list[float] | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None

    @classmethod
    def of_response(cls, payload: dict) -> "Sample":
        sample = cls(prompt_ids=payload.get("prompt_token_ids"))
        sample._add_choice(payload["choices"][0], text=payload["choices"][0]["message"].get("content") or "")
        sample._add_usage(payload.get("usage"))
        return sample

    def add_chunk(self, chunk: dict) -> None:
        if chunk.get("prompt_token_ids") is not None:
            self.prompt_ids = chunk["prompt_token_ids"]
        for choice in chunk.get("choices", []):
            self._add_choice(choice, text=(choice.get("delta") or {}).get("content") or "")
        self._add_usage(chunk.get("usage"))

    def _add_choice(self, choice: dict, *, text: str) -> None:
        self.text += text
        if choice.get("token_ids") is not None:
            self.completion_ids = self.completion_ids or []
            self.completion_ids.extend(choice["token_ids"])
        if (choice.get("logprobs") or {}).get("content") is not None:
            self.logprobs = self.logprobs or []
            self.logprobs.extend(entry["logprob"] for entry in choice["logprobs"]["content"])

    def _add_usage(self, usage: dict | None) -> None:
        if usage:
            self.prompt_tokens, self.completion_tokens = usage.get("prompt_tokens"), usage.get("completion_tokens")

    def token_count(self) -> int:
        """What the limiter charges: vLLM's usage, or for a stream cut short what it saw."""
        if self.prompt_tokens is not None and self.completion_tokens is not None:
            return self.prompt_tokens + self.completion_tokens
        return len(self.prompt_ids or []) + len(self.completion_ids or [])

    def prompt_count(self) -> int | None:
        """vLLM's count of the prompt's tokens, or for a stream cut short the ids it sent first."""
        if self.prompt_tokens is not None:
            return self.prompt_tokens
        return len(self.prompt_ids) if self.prompt_ids is not None else None

    def tokens(self) -> SampledTokens | None:
        if self.prompt_ids is None or self.completion_ids is None or self.logprobs is None:
            return None
        if len(self.completion_ids) != len(self.logprobs):
            log.warning("vLLM returned %d tokens but %d logprobs; keeping the text only", len(self.completion_ids), len(self.logprobs))
            return None
        return SampledTokens(prompt_ids=self.prompt_ids, completion_ids=self.completion_ids, logprobs=self.logprobs)
