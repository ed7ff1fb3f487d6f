"""The session's data: its records (the file format), the model read back, storage, fill records, the hit table."""
