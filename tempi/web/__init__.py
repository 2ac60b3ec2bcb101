"""`tempi web`: a browser console over the session API (tempi.client), one more front end."""
