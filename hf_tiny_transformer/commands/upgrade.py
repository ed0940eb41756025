"""Bring model folders saved by an earlier version up to this one, in place (hf_tiny_transformer.upgrade): weights in
the parameter layout of 0.1 (one `kv_proj` for keys and values) converted, and the code files the folder carries
replaced by this version's.

    tiny-transformer upgrade runs/en-ja/hub [more folders]

Every folder is read and checked before any is changed; each file is rewritten all or nothing.
"""

import sys

from ..errors import ArgumentParser
from .runner import command_output


def main(argv=None) -> int:
    parser = ArgumentParser(prog="tiny-transformer upgrade", description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", metavar="FOLDER", help="model folders saved by an earlier version")
    folders = parser.parse_args(argv).folders
    from ..upgrade import read_weights, refresh_code_files, upgrade_folder

    loaded = {folder: read_weights(folder) for folder in folders}  # all read before any change
    with command_output(sys.stdout) as output:
        for folder, (state_dict, metadata) in loaded.items():
            changes = ["weights converted"] if upgrade_folder(folder, state_dict, metadata) else []
            if refreshed := refresh_code_files(folder):
                changes.append(f"code files replaced ({', '.join(refreshed)})")
            output.info(f"{folder}: {'; '.join(changes) if changes else 'already up to date'}")
    return 0
