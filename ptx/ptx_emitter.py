"""Transitional re-export of kaio_ptx for generators not moved yet; delete
once no generator imports it."""

import os

from kaio_ptx.cli import main, write_or_check  # noqa: F401
from kaio_ptx.emitter import PtxEmitter  # noqa: F401
from kaio_ptx.params import load_params  # noqa: F401
from kaio_ptx.warp import sum_warp_partials  # noqa: F401


def main_for(doc, generate, here, script):
    return main(os.path.join(here, script), doc, generate)
