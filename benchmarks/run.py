"""`make bench`: install/build what the benchmark compares against (benchmarks/setup.sh), then
run Q1 (benchmarks/q1.py). Arguments are passed on to q1.py."""
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

if __name__ == "__main__":
    subprocess.run(["bash", str(HERE / "setup.sh")], check=True)
    import q1  # noqa: E402  (benchmarks/ is on sys.path as the script's directory)

    sys.exit(q1.main(sys.argv[1:]))
