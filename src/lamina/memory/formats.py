"""The formats ``memory import`` reads: lamina's own export, and mem0's memories
(``lamina.memory.records.from_mem0``). Apart from the records module so that the CLI can
offer them without importing what reading a record needs (numpy, pydantic, the settings)."""

FORMATS = ("lamina", "mem0")
