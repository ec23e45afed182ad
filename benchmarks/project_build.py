"""How a project's code is best built by SAM: one package per function, or a layer for the
dependencies plus a small function package. Artifact sizes and build times, side by side.

Run: .venv/bin/python benchmarks/project_build.py [--rounds 2] [--provider anthropic]

Needs `make infra` (.venv-infra/ with aws-sam-cli), a local interpreter of the template's
runtime (python3.13) and PyPI. It writes a project with this checkout's `awaken-s3 init`,
builds this checkout's wheel and lets pip find it through PIP_FIND_LINKS (what the project's
README says to do while awaken-s3 is not on an index), then builds two variants of the same
project with SAM's Python builder, in alternation, ``--rounds`` times each after one untimed
build of each (which fills pip's cache, so no round pays for the first download):

  layer     what `awaken-s3 init` writes: the functions' CodeUri is src/ (the code only), the
            dependencies are the DependenciesLayer built from layer/requirements.txt
  package   the functions' CodeUri is src/ with a requirements.txt there that includes
            layer/requirements.txt: the code and every dependency in each function's package

For each it prints the unzipped size and file count of what gets deployed, the zip sizes
(deflate, as `sam package` zips), the clean build time, the time of a `sam build --cached`
after a one-line change of the app's code (a developer's usual loop; SAM's incremental build
keeps the downloaded dependencies while the requirements file is unchanged, so that rebuild
copies them into the artifact rather than downloading them again), and what a first deploy and
a code-edit deploy upload (sam names a zip by its directory's checksum, so identical packages
are one upload, and an unchanged one is not uploaded again). Deploy time is not measured (no
AWS here): it is estimated from the bytes a deploy uploads, at 20 and 100 Mbit/s.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAM = ROOT / ".venv-infra" / "bin" / "sam"
INFRA_PYTHON = ROOT / ".venv-infra" / "bin" / "python"
FUNCTIONS = ("WorkerFunction", "ApiFunction", "SweeperFunction")
PACKAGE = "bench_desk"
_LAYER_BLOCK = re.compile(
    r"^  # The functions' dependencies, layer/.*?RetentionPolicy: Delete\n\n", re.S | re.M
)


@dataclass
class Measured:
    clean: list[float] = field(default_factory=list)
    cached_after_edit: list[float] = field(default_factory=list)
    deployed: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # bytes, files, zip
    #: zipped bytes a deploy uploads: the first one, and one after a code edit
    first_upload: int = 0
    edit_upload: int = 0


def tree_size(path: Path) -> tuple[int, int]:
    files = [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files), len(files)


def zip_size(path: Path) -> int:
    with tempfile.TemporaryDirectory() as scratch:
        target = Path(scratch) / "a.zip"
        with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
            for file in sorted(p for p in path.rglob("*") if p.is_file()):
                archive.write(file, file.relative_to(path))
        return target.stat().st_size


def checksum(path: Path) -> str:
    """The name `sam package` gives the zip of ``path`` (the directory's checksum)."""
    code = (
        "import sys; from samcli.lib.utils.hash import dir_checksum; "
        "print(dir_checksum(sys.argv[1], followlinks=True))"
    )
    return subprocess.run(
        [str(INFRA_PYTHON), "-c", code, str(path)], capture_output=True, text=True, check=True
    ).stdout.strip()


def upload_size(
    deployed: dict[str, tuple[int, int, int]], checksums: dict[str, str], uploaded: set[str]
) -> int:
    """The zipped bytes of the ``uploaded`` checksums (one zip per distinct checksum)."""
    sizes = {checksums[name]: zipped for name, (_, _, zipped) in deployed.items()}
    return sum(size for key, size in sizes.items() if key in uploaded)


def package_variant(project: Path) -> None:
    """The same project, its dependencies in every function's package instead of a layer."""
    template = (project / "template.yaml").read_text()
    template = template.replace("    Layers:\n      - !Ref DependenciesLayer\n", "")
    template, found = _LAYER_BLOCK.subn("", template)
    assert found == 1, "the project's template has no DependenciesLayer block"
    (project / "template-package.yaml").write_text(template)


def sam_build(
    project: Path, template: str, build: Path, env: dict[str, str], *, cached: bool
) -> float:
    command = [str(SAM), "build", "--template-file", template, "--build-dir", str(build)]
    command += ["--cached"] if cached else ["--no-cached"]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"sam build failed:\n{done.stdout}\n{done.stderr}")
    return elapsed


def with_src_requirements(project: Path, on: bool) -> None:
    requirements = project / "src" / "requirements.txt"
    if on:
        requirements.write_text("-r ../layer/requirements.txt\n")
    else:
        requirements.unlink(missing_ok=True)


def deployables(build: Path, variant: str) -> dict[str, Path]:
    found = {name: build / name for name in FUNCTIONS}
    if variant == "layer":
        found["DependenciesLayer"] = build / "DependenciesLayer"
    return found


def prepare(work: Path, provider: str, python: str) -> tuple[Path, dict[str, str]]:
    """This checkout's wheel for pip to find, a project written by its ``awaken-s3 init`` (with
    the one-package variant of its template beside), and the environment sam builds in."""
    wheels = work / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "-w",
            str(wheels),
            str(ROOT),
        ],
        check=True,
    )
    project = work / "bench-desk"
    awaken = Path(sys.executable).with_name("awaken-s3")
    subprocess.run(
        [str(awaken), "init", str(project), "--provider", provider],
        check=True,
        capture_output=True,
    )
    package_variant(project)
    env = {
        **os.environ,
        "PATH": f"{Path(python).parent}{os.pathsep}{os.environ['PATH']}",
        "PIP_FIND_LINKS": f"{wheels} {os.environ.get('PIP_FIND_LINKS', '')}".strip(),
        "SAM_CLI_TELEMETRY": "0",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    return project, env


def measure(args: argparse.Namespace) -> dict[str, Measured]:
    # The interpreter itself, not a pyenv shim that would not run (SAM checks its version).
    python = subprocess.run(
        [str(ROOT / "infra" / "find-python.sh"), "3.13"], capture_output=True, text=True
    ).stdout.strip()
    if not SAM.exists() or not python:
        raise SystemExit("needs `make infra` (.venv-infra/bin/sam) and a local python3.13")
    work = Path(tempfile.mkdtemp(prefix="awaken-project-build-"))
    try:
        project, env = prepare(work, args.provider, python)
        templates = {"layer": "template.yaml", "package": "template-package.yaml"}
        results = {variant: Measured() for variant in templates}
        agents = project / "src" / PACKAGE / "agents.py"
        original = agents.read_text()
        # Round 0 is the untimed warm-up that fills pip's cache.
        for round_ in range(0 if args.warmup else 1, args.rounds + 1):
            for variant, template in templates.items():
                with_src_requirements(project, variant == "package")
                agents.write_text(original)
                build = work / f"build-{variant}"
                shutil.rmtree(build, ignore_errors=True)
                shutil.rmtree(project / ".aws-sam", ignore_errors=True)
                clean = sam_build(project, template, build, env, cached=True)
                before = {
                    name: checksum(path) for name, path in deployables(build, variant).items()
                }
                agents.write_text(original + f"\n# edit {round_}\n")
                edited = sam_build(project, template, build, env, cached=True)
                after = {name: checksum(path) for name, path in deployables(build, variant).items()}
                if round_ == 0:
                    print(f"warm-up: {variant} built in {clean:.1f} s", flush=True)
                    continue
                measured = results[variant]
                measured.clean.append(clean)
                measured.cached_after_edit.append(edited)
                paths = deployables(build, variant)
                measured.deployed = {
                    name: (*tree_size(path), zip_size(path)) for name, path in paths.items()
                }
                measured.first_upload = upload_size(measured.deployed, before, set(before.values()))
                changed = {after[name] for name in paths if after[name] != before[name]}
                measured.edit_upload = upload_size(measured.deployed, after, changed)
                print(
                    f"round {round_}: {variant} clean {clean:.1f} s, cached after an edit "
                    f"{edited:.1f} s",
                    flush=True,
                )
        return results
    finally:
        shutil.rmtree(work, ignore_errors=True)


def mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB" if size >= 1e6 else f"{size / 1e3:.1f} kB"


def report(results: dict[str, Measured]) -> None:
    layer, package = results["layer"], results["package"]
    print()
    for variant, measured in results.items():
        print(f"{variant}:")
        for name, (size, files, zipped) in measured.deployed.items():
            print(f"  {name:18} {mb(size):>9} unzipped, {files:5} files, {mb(zipped):>9} zipped")
    print()
    rows = [
        ("clean sam build (median), s", [statistics.median(m.clean) for m in (layer, package)]),
        (
            "sam build --cached after a code edit (median), s",
            [statistics.median(m.cached_after_edit) for m in (layer, package)],
        ),
        ("first deploy uploads, kB", [m.first_upload / 1e3 for m in (layer, package)]),
        ("a code-edit deploy uploads, kB", [m.edit_upload / 1e3 for m in (layer, package)]),
    ]
    for mbits in (20, 100):
        rows.append(
            (
                f"... estimated upload time at {mbits} Mbit/s, s",
                [m.edit_upload * 8 / (mbits * 1e6) for m in (layer, package)],
            )
        )
    print(f"{'':52} {'layer':>10} {'package':>10} {'layer/package':>14}")
    for label, (a, b) in rows:
        ratio = f"{a / b:.4f}x" if b else "-"
        print(f"{label:52} {a:>10.2f} {b:>10.2f} {ratio:>14}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--provider", default="anthropic", choices=("bedrock", "anthropic", "openai")
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="one round, no warm-up, the Bedrock-only project (minutes, not seconds: four sam "
        "builds): shows the script runs, its figures mean nothing",
    )
    args = parser.parse_args()
    args.warmup = not args.quick
    if args.quick:
        args.rounds, args.provider = 1, "bedrock"
    report(measure(args))


if __name__ == "__main__":
    main()
