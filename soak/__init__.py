"""The fault soak: many JobSet tasks at once through real Airflow processes while components
are killed and credentials expire (``make soak``; a small fixed-seed run is part of
``make test``). See soak/README.md."""
