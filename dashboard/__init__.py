"""The Streamlit dashboard over the suite's Parquet runs."""
