"""The upgrade gate: the check catalogue (`checks`), the report of a check run (`report`), the diff of
two runs (`diff`, its HTML and Markdown pages `diff_pages`, the causes it groups changes into
`causes`, the changes a user accepted `accepted`) and what of a cell counts as its behaviour
(`measured`). It knows nothing of environments or version points: `versions` builds on it.
"""
