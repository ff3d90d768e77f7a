"""Graph memory: entities and relations an LLM extracts from observations, validated."""

from __future__ import annotations

from pydantic import BaseModel, Field, ValidationError, field_validator

from lamina.errors import ErrorCode, LaminaError
from lamina.llm.answers import parse_json

MAX_ENTITIES = 20
MAX_RELATIONS = 30


def _clean(value: str) -> str:
    return " ".join(value.split())


class Entity(BaseModel):
    name: str = Field(min_length=1, max_length=100)
    type: str = Field(default="other", max_length=40)

    @field_validator("name", "type")
    @classmethod
    def _strip(cls, value: str) -> str:
        return _clean(value)


class Relation(BaseModel):
    source: str = Field(min_length=1, max_length=100)
    relation: str = Field(min_length=1, max_length=60)
    target: str = Field(min_length=1, max_length=100)

    @field_validator("source", "relation", "target")
    @classmethod
    def _strip(cls, value: str) -> str:
        return _clean(value)


class GraphExtraction(BaseModel):
    entities: list[Entity] = Field(default_factory=list, max_length=200)
    relations: list[Relation] = Field(default_factory=list, max_length=300)


def parse_extraction(raw: str) -> GraphExtraction:
    """The model's JSON answer, validated and trimmed; PROVIDER_ERROR when it is not one."""
    try:
        parsed = GraphExtraction.model_validate(parse_json(raw))
    except (ValidationError, ValueError) as exc:
        raise LaminaError(
            ErrorCode.PROVIDER_ERROR,
            f"graph extraction returned invalid output: {str(exc)[:200]}",
            retryable=False,
        ) from None
    names = {e.name.lower() for e in parsed.entities}
    relations = [
        r
        for r in parsed.relations
        if r.source and r.target and r.source.lower() != r.target.lower()
    ][:MAX_RELATIONS]
    for r in relations:  # endpoints are entities too
        names.update((r.source.lower(), r.target.lower()))
    return GraphExtraction(
        entities=parsed.entities[:MAX_ENTITIES], relations=relations[:MAX_RELATIONS]
    )
