"""The CUDA ops' run-time variant choice: fastest kept per key, tuned once, shown in config."""
from types import SimpleNamespace

from implementations._cuda_variants import VariantTuner


def test_tuner_keeps_the_fastest_variant_per_key_and_tunes_once(monkeypatch):
    import suite.timing

    cost = {("a", 1): 3.0, ("a", 2): 1.0, ("a", 3): 2.0, ("b", 1): 0.5, ("b", 2): 1.0, ("b", 3): 2.0}
    timed = []

    def fake_measure(calls, device, timer, **limits):
        assert device == "cuda" and timer == "events"
        out = calls[0]()
        timed.append(out)
        return SimpleNamespace(median=cost[out])

    monkeypatch.setattr(suite.timing, "measure", fake_measure)
    tuner = VariantTuner((1, 2, 3), {1: "one", 2: "two", 3: "three"})
    ran = []

    def op(key):
        return lambda v: ran.append(v) or (key, v)

    assert tuner.config("a") is None
    assert tuner.run("a", op("a")) == ("a", 2)
    assert sorted(v for _, v in timed) == [1, 2, 3]
    assert tuner.run("a", op("a")) == ("a", 2) and len(timed) == 3  # not tuned again
    assert tuner.run("b", op("b")) == ("b", 1) and len(timed) == 6
    text = tuner.config("a")
    assert text.startswith("variant 2: two (autotuned") and "1:3000us" in text
