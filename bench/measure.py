"""What bench/cost.py measured for one system in one round, and the side-by-side table."""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from dataclasses import dataclass, field


@dataclass
class Measured:
    system: str
    emails: bool = True
    load: dict[str, float] = field(default_factory=dict)  # wrk's summary
    load_seconds: float = 0.0
    backlog: int = 0  # acknowledged but not applied when the load stopped
    applied: int = 0
    emails_sent: int = 0
    effects_seconds: float = 0.0  # from the load's start to the last access effect seen
    emails_seconds: float = 0.0  # from the load's start to the last e-mail seen
    peak_rss_mb: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)  # stage -> CPU s, load and drain
    postgres_cpu: float = 0.0
    replay: dict[str, float] = field(default_factory=dict)
    replay_cpu: dict[str, float] = field(default_factory=dict)
    replay_postgres_cpu: float = 0.0
    idle_cpu: dict[str, float] = field(default_factory=dict)  # stage -> CPU s subtracted
    idle_postgres_cpu: float = 0.0
    unique: int = 0  # distinct events prepared: wrk wraps around when it sends more

    @property
    def acked(self) -> int:
        return int(self.load["requests"] - self.load["status_errors"])

    @property
    def wanted(self) -> int:
        """The distinct events acknowledged: what is applied and mailed when all is."""
        return min(self.acked, self.unique) if self.unique else self.acked

    @property
    def ack_rate(self) -> float:
        return self.acked / (self.load["duration_us"] / 1e6)

    @property
    def p99_ms(self) -> float:
        return self.load["p99_us"] / 1000

    @property
    def applied_rate(self) -> float:
        return self.applied / self.effects_seconds if self.effects_seconds else 0.0

    @property
    def email_rate(self) -> float:
        return self.emails_sent / self.emails_seconds if self.emails_seconds else 0.0

    def ms_per_applied(self, stage: str | None = None) -> float:
        """CPU ms a stage spends per event it carried (the api per acknowledged event, access
        per applied change, emails per mail sent); without a stage, what one event costs
        through all of them: their sum, so that a backlog left in the queue at the end (the
        api's work done, the subscribers' not) does not count as cost."""
        stages = [k for k in self.cpu if k != "emulator"]
        if stage is None and len(stages) > 1:
            return sum(self.ms_per_applied(k) for k in stages)
        seconds = self.cpu[stage] if stage else self._service_cpu()
        divisor = {"api": self.acked, "emails": self.emails_sent}.get(stage or "", self.applied)
        return 1000 * seconds / divisor if divisor else float("nan")

    def ms_per_duplicate(self, stage: str | None = None) -> float:
        acked = self.replay.get("requests", 0) - self.replay.get("status_errors", 0)
        seconds = self.replay_cpu.get(stage, 0.0) if stage else self._service_cpu(self.replay_cpu)
        return 1000 * seconds / acked if acked else float("nan")

    def _idle(self) -> str:
        """CPU ms subtracted as idle, per stage and Postgres."""
        parts = [f"{k} {1000 * v:.0f}" for k, v in self.idle_cpu.items()]
        return ", ".join([*parts, f"Postgres {1000 * self.idle_postgres_cpu:.0f} ms"])

    def _service_cpu(self, cpu: dict[str, float] | None = None) -> float:
        # The emulator stands in for Google's service: not this service's CPU.
        return sum(v for k, v in (cpu or self.cpu).items() if k != "emulator")

    def line(self) -> str:
        stages = ", ".join(
            f"{k} {self.ms_per_applied(k):.2f}" for k in self.cpu if len(self.cpu) > 1
        )
        return (
            f"{self.system}: acked {self.acked} ({self.ack_rate:.0f}/s, p99 {self.p99_ms:.0f} ms),"
            f" refused {int(self.load['status_errors'])},"
            f" lost by wrk (socket errors) {int(self.load['socket_errors'])};"
            f" applied {self.applied} ({self.applied_rate:.0f}/s, last {self.effects_seconds:.1f} s"
            f" after the first request), e-mails {self.emails_sent} ({self.email_rate:.0f}/s,"
            f" last {self.emails_seconds:.1f} s after);"
            f" backlog at end of load {self.backlog}; peak RSS {self.peak_rss_mb:.0f} MB;"
            f" CPU ms/applied {self.ms_per_applied():.2f} ({stages or 'one process'}),"
            f" Postgres {1000 * self.postgres_cpu / max(self.applied, 1):.2f}"
            f" (net of idle: {self._idle()});"
            f" duplicate CPU ms {self.ms_per_duplicate():.2f}"
        )


def report(results: list[Measured], args: argparse.Namespace) -> None:
    by_system: dict[str, list[Measured]] = defaultdict(list)
    for m in results:
        by_system[m.system].append(m)
    print(
        f"\n{args.connections} connections, {args.duration:.0f} s, {args.customers} customers,"
        f" {args.rounds} round(s); median of rounds; CPU ms per applied event (Postgres apart)"
        + (f"; Postgres {args.pg_latency_ms:g} ms away each way" if args.pg_latency_ms else "")
        + (f", behind PgBouncer (transaction mode, pool {args.pooler})" if args.pooler else "")
    )
    head = ("system", "ack/s", "p99 ms", "applied/s", "e-mails", "mailed/s", "backlog", "RSS MB")
    print(
        f"{head[0]:<13}" + "".join(f"{h:>10}" for h in head[1:]) + f"{'CPU ms':>9}"
        f"{'PG ms':>8}{'dup ms':>8}  per stage (CPU ms; dup ms)"
    )
    for name, runs in by_system.items():
        med = _median(runs)
        stages = "; ".join(
            f"{k} {_median_of(runs, lambda m, k=k: m.ms_per_applied(k)):.2f}"
            f" dup {_median_of(runs, lambda m, k=k: m.ms_per_duplicate(k)):.2f}"
            for k in runs[0].cpu
            if len(runs[0].cpu) > 1
        )
        print(
            f"{name:<13}{med(lambda m: m.ack_rate):>10.0f}{med(lambda m: m.p99_ms):>10.0f}"
            f"{med(lambda m: m.applied_rate):>10.0f}{med(lambda m: m.emails_sent):>10.0f}"
            f"{med(lambda m: m.email_rate):>10.0f}"
            f"{med(lambda m: m.backlog):>10.0f}{med(lambda m: m.peak_rss_mb):>10.0f}"
            f"{med(lambda m: m.ms_per_applied()):>9.2f}"
            f"{med(lambda m: 1000 * m.postgres_cpu / max(m.applied, 1)):>8.2f}"
            f"{med(lambda m: m.ms_per_duplicate()):>8.2f}  {stages}"
        )
    targets(by_system)


def targets(by_system: dict[str, list[Measured]]) -> None:
    """The two targets against stripe-sync-engine in the same run: the in-process path applies
    at least as fast; the deployed designs spend at most 3x its CPU per applied event (every
    process but the emulator, Postgres included) with every e-mail sent."""
    if "sync-engine" not in by_system:
        return
    base = by_system["sync-engine"]
    rate = _median_of(base, lambda m: m.applied_rate)
    cost = _median_of(
        base, lambda m: m.ms_per_applied() + 1000 * m.postgres_cpu / max(m.applied, 1)
    )
    if "inline" in by_system:
        ratio = _median_of(by_system["inline"], lambda m: m.applied_rate) / rate
        met = "met" if ratio >= 1 else "not met"
        print(f"inline applied/s vs stripe-sync-engine's: {ratio:.0%} (target >= 100%: {met})")
    for name in ("pubsub", "pull"):
        if name not in by_system:
            continue
        runs = by_system[name]
        total = _median_of(
            runs, lambda m: m.ms_per_applied() + 1000 * m.postgres_cpu / max(m.applied, 1)
        )
        mailed = all(m.emails_sent >= m.wanted for m in runs)
        met = "met" if total <= 3 * cost and mailed else "not met"
        print(
            f"{name} CPU per applied event with Postgres: {total:.2f} ms, {total / cost:.1f}x"
            f" stripe-sync-engine's {cost:.2f}; every e-mail sent: {'yes' if mailed else 'no'}"
            f" (target <= 3x with every e-mail: {met})"
        )


def _median(runs: list[Measured]):  # type: ignore[no-untyped-def]
    return lambda f: _median_of(runs, f)


def _median_of(runs: list[Measured], f) -> float:  # type: ignore[no-untyped-def]
    return float(statistics.median(f(m) for m in runs))
