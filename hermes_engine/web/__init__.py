"""The `web` toolset: fetching pages safely and searching the web (see `feature.WebFeature`)."""
