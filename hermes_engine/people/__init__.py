"""People across platforms: one person behind several accounts (`/link`), and forgetting a person."""
