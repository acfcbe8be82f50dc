"""Reference implementations the tests compare the library with (they left ``src/``)."""
