"""`vlcheck plant`: a known defect planted in the installed vLLM, to measure which checks catch it."""

from __future__ import annotations

import sys

EXIT_CODES = {"plant": [(0, "ok", "planted, undone, or listed")]}


def cmd_plant(args) -> int:
    from vlcheck.runners import plant

    if args.list:
        print("\n".join(plant.listing()))
        return 0
    try:
        models = plant.models_dir()
        if args.undo:
            plant.undo(models)
            return 0
        if not args.plants:
            print("vlcheck plant: name a plant (`vlcheck plant --list`), or --undo", file=sys.stderr)
            return 2
        for name in args.plants:
            plant.plant(name, models)
    except plant.PlantError as err:
        print(f"vlcheck plant: {err}", file=sys.stderr)
        return 2
    return 0


def register(sub) -> None:
    p = sub.add_parser("plant", help="plant a known defect in the installed vLLM (then run a tier, then --undo): "
                                     "which checks catch it is measured, not assumed",
                       description="Each plant edits one line of the installed vLLM's source (the original kept beside "
                                   "it as <file>.vlcheck-orig), written against vLLM 0.24.0; where that line is gone it "
                                   "fails naming the file and line. projector[:FAMILY]: the vision features x 1.01 after "
                                   "the projector; compiled-only: Qwen2's decoder layers x 1.01 only where torch.compile "
                                   "traces them (only the `compiled` configuration can catch it); slow-processor:FAMILY: that "
                                   "family's multimodal processing 30% slower (only `vlcheck speed ab` can catch it); slow-render:FAMILY: that "
                                   "family's chat rendering 30% slower (`speed ab`'s chat_render metric); video-frames:LOADER: that "
                                   "video loader takes the frame after each one its sampling picks (`video_loaders` catches it).")
    p.add_argument("plants", nargs="*", metavar="PLANT", help="projector, projector:FAMILY, compiled-only, graphs-drop-media, slow-processor:FAMILY, "
                   "slow-render:FAMILY, video-frames:LOADER")
    p.add_argument("--undo", action="store_true", help="restore every planted file")
    p.add_argument("--list", action="store_true", help="the plants and the files they edit")
    p.set_defaults(func=cmd_plant)
