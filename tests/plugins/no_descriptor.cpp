// A shared library that is not an attnlab plugin.
extern "C" int some_function() { return 42; }
