"""model and planning stay pure: importing them pulls in no pyspark, simulator or CLI; nor
do the low rooms of the runtime pull in pyspark."""

from __future__ import annotations

import subprocess
import sys


def test_pure_layers_import_no_pyspark() -> None:
    code = (
        "import sys, pkgutil, importlib, streamscale.model, streamscale.planning\n"
        "for pkg in (streamscale.model, streamscale.planning):\n"
        "    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
        "        importlib.import_module(m.name)\n"
        "streamscale.planning.entries()\n"
        "bad = [m for m in sys.modules if m.split('.')[0] == 'pyspark' or m.startswith(("
        "'streamscale.runtime', 'streamscale.sim', 'streamscale.cli', 'streamscale.experiments'))]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_the_low_rooms_of_the_runtime_import_no_pyspark() -> None:
    """routing, state and cluster (docs/architecture.md, "The runtime's rooms") load
    without pyspark and without a higher room: the run's settings pass reads them."""
    code = (
        "import sys, pkgutil, importlib\n"
        "rooms = ('routing', 'state', 'cluster')\n"
        "for r in rooms:\n"
        "    pkg = importlib.import_module('streamscale.runtime.spark.' + r)\n"
        "    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
        "        importlib.import_module(m.name)\n"
        "bad = [m for m in sys.modules if m.split('.')[0] == 'pyspark' or ("
        "m.startswith('streamscale.runtime.spark.') and m.split('.')[3] not in rooms)]\n"
        "print(','.join(sorted(bad)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
