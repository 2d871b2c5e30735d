"""All assignor benchmarks in one run: `.venv/bin/python -m bench.assignors` (prints figures)."""

from __future__ import annotations

from bench import assignors_high_availability, assignors_sticky, assignors_stream_join


def main() -> None:
    """Run the sticky, stream-join and high-availability benchmarks one after another."""
    for module in (assignors_sticky, assignors_stream_join, assignors_high_availability):
        module.run()
        print()


if __name__ == "__main__":
    main()
