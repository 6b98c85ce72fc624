"""Engine configurations users deploy (chunked prefill, prefix caching, a processor cache under
load, long prompts, video files, their own launch flags), each a cell per family-config:
`registry` names them, `checks` runs one, `offline`, `load`, `long_prompts` and `video_file`
measure them, `outcome` makes the cell."""
