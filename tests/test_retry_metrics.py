"""The retry policy's delays and the metrics each runtime keeps."""

from __future__ import annotations

from pathlib import Path

import pytest

from lamina import ErrorCode, Lamina, LaminaError
from lamina.retry import RetryPolicy


def test_retry_policy_delays() -> None:
    policy = RetryPolicy()
    transient = LaminaError(ErrorCode.PROVIDER_ERROR, "down")
    assert [policy.delay(n, transient) for n in (1, 2, 3, 4, 5, 6)] == [1, 2, 4, 8, 16, 30]
    limited = LaminaError(ErrorCode.RATE_LIMITED, "slow down", retry_after=7.5)
    assert policy.delay(1, limited) == 7.5
    assert policy.delay(1, LaminaError(ErrorCode.RATE_LIMITED, "x", retry_after=99)) == 30
    assert transient.retryable and limited.retryable
    assert not LaminaError(ErrorCode.INVALID_LAYER, "x").retryable
    for code in ErrorCode:
        assert LaminaError(code, "m").to_dict()["code"] == code.value


def test_metrics_per_runtime(ms: Lamina, tmp_path: Path) -> None:
    ms.memory.add("metric one", layer="user", user_id="u")
    ms.memory.add("metric two", layer="project", project_id="p")
    ms.memory.search("metric", user_id="u", project_id="p", threshold=0.0)
    with pytest.raises(LaminaError):
        ms.memory.add("x", layer="bogus", user_id="u")
    text = ms.metrics_text()
    assert 'memory_operations_total{operation="add"} 3.0' in text
    assert 'memory_operations_total{operation="search"} 1.0' in text
    assert 'memory_operations_latency_seconds_count{operation="add"} 3.0' in text
    assert 'memory_search_results_count{layer="project"} 1.0' in text
    assert 'memory_search_results_sum{layer="company"} 0.0' in text
    assert 'memory_storage_size{layer="user"} 1.0' in text
    assert 'memory_operations_errors_total{code="INVALID_LAYER"} 1.0' in text
    with Lamina(data_dir=tmp_path / "other") as other:
        assert 'operation="add"' not in other.metrics_text()
