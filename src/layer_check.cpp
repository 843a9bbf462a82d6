// Linked with the objects of some layers only (src/CMakeLists.txt): the link fails if one of
// them calls into a layer above it. Nothing to run.
int main() { return 0; }
