"""Train (or only merge) a LoRA adapter as described by an sft-config.yaml file."""

from __future__ import annotations

import argparse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", required=True)
    parser.add_argument("--merge-only", action="store_true")
    args = parser.parse_args()
    print(f"would train with {args.config} (merge only: {args.merge_only})")


if __name__ == "__main__":
    main()
