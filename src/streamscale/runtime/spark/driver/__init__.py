"""The job driver: job graphs and linear jobs, the run loop and the batch body, the control step, collectors, the mid-batch watch, history, metrics and the Prometheus exporter."""
