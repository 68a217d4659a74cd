"""Every setting of wfrl, declared once: the field machinery (fields), the runs' settings (run),
eval and planner settings (eval), the tool commands' settings (tools) and settings files (files).
Nothing here imports numpy or torch."""
