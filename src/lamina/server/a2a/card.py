"""The Agent Card, built from the tool registry each time it changes."""

from __future__ import annotations

from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    APIKeySecurityScheme,
    SecurityRequirement,
    SecurityScheme,
)
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT
from google.protobuf.json_format import ParseDict

from lamina.server.tools.registry import ToolRegistry, describe

#: The extension that carries what the A2A 1.0 card has no field for.
TOOLS_EXTENSION = "https://github.com/lamina/lamina/extensions/tools/v1"
SPEC_VERSION = PROTOCOL_VERSION_CURRENT

_SKILLS = {
    "memory": (
        "Memory",
        "Scoped long-term memories (agent, user, session, project, team, org, company): "
        "add, search, read, change, delete, list.",
    ),
    "knowledge": (
        "Knowledge",
        "The git-backed repository of ADRs, policies, patterns and specs: query, read, "
        "create, update, move along the lifecycle, history.",
    ),
    "governance": (
        "Governance",
        "Policies merged from the company down: validate content, score drift, list policies.",
    ),
    "context": (
        "Context and sessions",
        "A session's conversation (append, read), its observations and reflections, and the "
        "system prompt for the next model call with the context it needs.",
    ),
}


class CardBuilder:
    def __init__(
        self, registry: ToolRegistry, url: str, *, auth: bool, version: str, fixed: bool
    ) -> None:
        self._registry = registry
        # No trailing slash: clients append "/message:send" and the like to it.
        self._url = url.rstrip("/")
        self._fixed = fixed
        self._auth = auth
        self._version = version
        self._built: tuple[int, AgentCard] | None = None

    def card(self, url: str | None = None) -> AgentCard:
        """The card; ``url`` (where the request reached us) replaces the interfaces' URL
        when no public URL is configured."""
        if self._built is None or self._built[0] != self._registry.version:
            self._built = (self._registry.version, self._build())
        card = self._built[1]
        if url is None or self._fixed:
            return card
        copy = AgentCard()
        copy.CopyFrom(card)
        for interface in copy.supported_interfaces:
            interface.url = url.rstrip("/")
        return copy

    def _build(self) -> AgentCard:
        skills = []
        for skill, tools in self._registry.skills().items():
            name, description = _SKILLS.get(skill, (skill.title(), f"The {skill} tools."))
            listed = ", ".join(t.name for t in tools)
            skills.append(
                AgentSkill(
                    id=skill,
                    name=name,
                    description=f"{description} Tools: {listed}.",
                    tags=[skill, *(t.name for t in tools)],
                    examples=[
                        f'{{"tool": "{tools[0].name}", "arguments": {{...}}}} as a data part'
                    ],
                    input_modes=["application/json", "text/plain"],
                    output_modes=["application/json"],
                )
            )
        extension = AgentExtension(
            uri=TOOLS_EXTENSION,
            description="Tool input schemas, the A2A specification version supported and "
            "state-transition history (fields the A2A 1.0 card does not have).",
            required=False,
        )
        ParseDict(
            {
                "a2a_spec_version": SPEC_VERSION,
                "state_transition_history": True,
                "direct_tool_routing": 'a data part {"tool": name, "arguments": {...}}',
                "tools": describe(self._registry.all()),
            },
            extension.params,
        )
        card = AgentCard(
            name="lamina",
            description="Layered long-term memory, knowledge and governance for AI agents.",
            version=self._version,
            provider=AgentProvider(organization="lamina", url="https://github.com/lamina/lamina"),
            supported_interfaces=[
                AgentInterface(
                    url=self._url, protocol_binding="JSONRPC", protocol_version=SPEC_VERSION
                ),
                AgentInterface(
                    url=self._url, protocol_binding="HTTP+JSON", protocol_version=SPEC_VERSION
                ),
            ],
            capabilities=AgentCapabilities(
                streaming=True, push_notifications=False, extensions=[extension]
            ),
            default_input_modes=["application/json", "text/plain"],
            default_output_modes=["application/json", "text/plain"],
            skills=skills,
        )
        if self._auth:
            card.security_schemes["apiKey"].CopyFrom(
                SecurityScheme(
                    api_key_security_scheme=APIKeySecurityScheme(
                        name="X-API-Key",
                        location="header",
                        description="Or Authorization: Bearer <key>.",
                    )
                )
            )
            card.security_requirements.append(
                ParseDict({"schemes": {"apiKey": {"list": []}}}, SecurityRequirement())
            )
        return card
