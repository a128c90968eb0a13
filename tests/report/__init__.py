"""Tests of `trainsim report`: the page it writes, rendered by headless Chromium."""
