"""PEP 517 backend: setuptools, or its own wheel writer where setuptools cannot build wheels."""

# setuptools before 70.1 builds wheels only with the `wheel` package installed. Where neither is
# there (pip install --no-build-isolation into an environment without `wheel`, as on a machine
# with no package index: a standard backend cannot be fetched there), this backend still reads
# the project from pyproject.toml with setuptools, has setuptools write its metadata (the README
# as the description, the project URLs: what setuptools.build_meta writes), and zips the
# pure-Python wheel itself with the standard library. Everywhere else it is
# setuptools.build_meta, untouched.

from __future__ import annotations

import base64
import hashlib
import io
import os
import zipfile
from typing import Any, Dict, List, Optional, Tuple

from setuptools import build_meta as _setuptools

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_TAG = "py3-none-any"


def _setuptools_builds_wheels() -> bool:
    try:
        import setuptools.command.bdist_wheel  # noqa: F401  (setuptools >= 70.1)
    except ImportError:
        try:
            import wheel.bdist_wheel  # noqa: F401
        except ImportError:
            return False
    return True


# Build requirements, sdists: setuptools handles these with or without `wheel`.


def get_requires_for_build_sdist(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return _setuptools.get_requires_for_build_sdist(config_settings)


def build_sdist(sdist_directory: str, config_settings: Optional[Dict[str, Any]] = None) -> str:
    return _setuptools.build_sdist(sdist_directory, config_settings)


def get_requires_for_build_wheel(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    if _setuptools_builds_wheels():
        return _setuptools.get_requires_for_build_wheel(config_settings)
    return []


def get_requires_for_build_editable(
    config_settings: Optional[Dict[str, Any]] = None,
) -> List[str]:
    return get_requires_for_build_wheel(config_settings)


def prepare_metadata_for_build_wheel(
    metadata_directory: str, config_settings: Optional[Dict[str, Any]] = None
) -> str:
    if _setuptools_builds_wheels():
        return _setuptools.prepare_metadata_for_build_wheel(metadata_directory, config_settings)
    return _write_dist_info(metadata_directory)


def prepare_metadata_for_build_editable(
    metadata_directory: str, config_settings: Optional[Dict[str, Any]] = None
) -> str:
    return prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def build_wheel(
    wheel_directory: str,
    config_settings: Optional[Dict[str, Any]] = None,
    metadata_directory: Optional[str] = None,
) -> str:
    if _setuptools_builds_wheels():
        return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)
    project = _Project.read()
    files = [(arcname, _read(path)) for arcname, path in project.package_files()]
    return _write_wheel(wheel_directory, project, files)


def build_editable(
    wheel_directory: str,
    config_settings: Optional[Dict[str, Any]] = None,
    metadata_directory: Optional[str] = None,
) -> str:
    if _setuptools_builds_wheels():
        return _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)
    project = _Project.read()
    # A .pth file puts the source folder on sys.path: edits show without reinstalling.
    pth = f"__editable__.{project.name}-{project.version}.pth"
    return _write_wheel(wheel_directory, project, [(pth, (project.source_root + "\n").encode())])


class _Project:
    """What the wheel needs from pyproject.toml, read by setuptools' own parser."""

    def __init__(self, config: Dict[str, Any]) -> None:
        meta = config["project"]
        tool = config.get("tool", {}).get("setuptools", {})
        self.name: str = meta["name"]
        self.version: str = meta["version"]
        self.packages: List[str] = list(tool.get("packages") or [])
        package_dir: Dict[str, str] = tool.get("package-dir") or {}
        self.source_root = os.path.join(_ROOT, package_dir.get("", "."))
        if not self.packages:
            raise RuntimeError("pyproject.toml: no packages found under the source folder")

    @classmethod
    def read(cls) -> _Project:
        from setuptools.config.pyprojecttoml import read_configuration

        return cls(read_configuration(os.path.join(_ROOT, "pyproject.toml")))

    @property
    def dist_info(self) -> str:
        return f"{_normalize(self.name)}-{self.version}.dist-info"

    def package_files(self) -> List[Tuple[str, str]]:
        out = []
        for package in self.packages:
            folder = os.path.join(self.source_root, *package.split("."))
            for entry in sorted(os.listdir(folder)):
                path = os.path.join(folder, entry)
                if os.path.isfile(path) and not entry.endswith((".pyc", ".pyo")):
                    out.append(("/".join([*package.split("."), entry]), path))
        return out

    def metadata(self) -> bytes:
        """METADATA, written by setuptools from pyproject.toml as it writes PKG-INFO."""
        from setuptools.config.pyprojecttoml import apply_configuration
        from setuptools.dist import Distribution

        # The readme's path is read from pyproject.toml's folder, whatever the working directory.
        dist = apply_configuration(Distribution(), os.path.join(_ROOT, "pyproject.toml"))
        out = io.StringIO()
        dist.metadata.write_pkg_file(out)
        return out.getvalue().encode("utf-8")


def _normalize(name: str) -> str:
    return "_".join(part for part in name.replace("-", "_").replace(".", "_").split("_") if part)


def _wheel_file() -> bytes:
    return (
        "Wheel-Version: 1.0\nGenerator: delayq _build/backend.py\n"
        f"Root-Is-Purelib: true\nTag: {_TAG}\n"
    ).encode()


def _write_dist_info(metadata_directory: str) -> str:
    project = _Project.read()
    folder = os.path.join(metadata_directory, project.dist_info)
    os.makedirs(folder, exist_ok=True)
    for name, content in (("METADATA", project.metadata()), ("WHEEL", _wheel_file())):
        with open(os.path.join(folder, name), "wb") as out:
            out.write(content)
    return project.dist_info


def _write_wheel(directory: str, project: _Project, files: List[Tuple[str, bytes]]) -> str:
    dist_info = project.dist_info
    files = files + [
        (f"{dist_info}/METADATA", project.metadata()),
        (f"{dist_info}/WHEEL", _wheel_file()),
    ]
    record = []
    for arcname, content in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=").decode()
        record.append(f"{arcname},sha256={digest},{len(content)}")
    record.append(f"{dist_info}/RECORD,,")
    files.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode()))
    filename = f"{_normalize(project.name)}-{project.version}-{_TAG}.whl"
    os.makedirs(directory, exist_ok=True)
    with zipfile.ZipFile(os.path.join(directory, filename), "w", zipfile.ZIP_DEFLATED) as wheel:
        for arcname, content in files:
            info = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, content)
    return filename


def _read(path: str) -> bytes:
    with open(path, "rb") as source:
        return source.read()
