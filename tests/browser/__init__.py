"""Real-browser tests: the course notebooks run in JupyterLab, driven in Chromium by Playwright."""
