# shm transport tests (test-shm-*.c), included from test/xport/CMakeLists.txt.
be_add_test(shm-basic SOURCES ${CMAKE_CURRENT_LIST_DIR}/test-shm-basic.c LABELS xport shm TIMEOUT 60)
be_add_test(shm-rkey SOURCES ${CMAKE_CURRENT_LIST_DIR}/test-shm-rkey.c LABELS xport shm TIMEOUT 60)
be_add_test(shm-recv-err SOURCES ${CMAKE_CURRENT_LIST_DIR}/test-shm-recv-err.c LABELS xport shm TIMEOUT 60)
be_add_test(shm-twoproc SOURCES ${CMAKE_CURRENT_LIST_DIR}/test-shm-twoproc.c LABELS xport shm TIMEOUT 120)
be_add_test(shm-kill SOURCES ${CMAKE_CURRENT_LIST_DIR}/test-shm-kill.c LABELS xport shm TIMEOUT 60)
be_add_test(shm-wakeup SOURCES ${CMAKE_CURRENT_LIST_DIR}/test-shm-wakeup.c LABELS xport shm TIMEOUT 60)
be_add_test(shm-threads SOURCES ${CMAKE_CURRENT_LIST_DIR}/test-shm-threads.c LABELS xport shm threads TIMEOUT 120)
be_add_test(shm-many-regions SOURCES ${CMAKE_CURRENT_LIST_DIR}/test-shm-many-regions.c LABELS xport shm TIMEOUT 60)
