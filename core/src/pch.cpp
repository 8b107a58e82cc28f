// Compiles the precompiled header; nothing else lives here.
