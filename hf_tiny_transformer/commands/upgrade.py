"""Convert model folders saved by hf-tiny-transformer 0.1 (one `kv_proj` for keys and values) to the current
parameter layout, in place (hf_tiny_transformer.upgrade).

    tiny-transformer upgrade runs/en-ja/hub [more folders]

Every folder is read and checked before any is changed; each model.safetensors is rewritten all or nothing.
"""

import sys

from ..errors import ArgumentParser
from .runner import command_output


def main(argv=None) -> int:
    parser = ArgumentParser(prog="tiny-transformer upgrade", description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", metavar="FOLDER", help="model folders saved by 0.1")
    folders = parser.parse_args(argv).folders
    from ..upgrade import read_weights, upgrade_folder

    loaded = {folder: read_weights(folder) for folder in folders}  # all read before any change
    with command_output(sys.stdout) as output:
        for folder, (state_dict, metadata) in loaded.items():
            converted = upgrade_folder(folder, state_dict, metadata)
            output.info(f"{folder}: {'converted' if converted else 'already in the current layout'}")
    return 0
