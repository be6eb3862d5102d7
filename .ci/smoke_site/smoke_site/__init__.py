"""A minimal Django project that uses an installed a2a-endpoint, as the README's quickstart."""
