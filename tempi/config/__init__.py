"""tempi's configuration: where files live, models.json, settings.json and API keys."""
