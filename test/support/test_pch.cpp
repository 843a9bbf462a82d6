// The source of the test precompiled header target (test/CMakeLists.txt); nothing else.
