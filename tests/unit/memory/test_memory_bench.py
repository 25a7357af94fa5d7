import json

from reflexmem.memory.bench import bench_memory


def test_bench_reports_json_able_per_episode_microseconds_and_parts() -> None:
    result = bench_memory(episodes=20, seed=1)
    assert json.loads(json.dumps(result)) == result
    assert result["entries_per_tier"] == 500
    assert result["candidates_per_query"] == 1500
    parts = result["parts_us"]
    assert set(parts) == {"candidates", "ranking", "render", "bandit_select", "bandit_update"}
    assert result["us_per_episode"] > 0
    assert abs(sum(parts.values()) - result["us_per_episode"]) < 0.1
    assert result["mean_recalled"] == 5.0
