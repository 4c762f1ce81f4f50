import java.io.BufferedReader;
import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Collection;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.yarn.api.protocolrecords.KillApplicationRequest;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.MiniYARNCluster;
import org.apache.hadoop.yarn.server.nodemanager.containermanager.container.Container;
import org.apache.hadoop.yarn.server.nodemanager.containermanager.container.ContainerState;
import org.apache.hadoop.yarn.server.resourcemanager.ResourceManager;
import org.apache.hadoop.yarn.server.resourcemanager.rmapp.RMApp;

/**
 * A YARN cluster on loopback: a ResourceManager and one NodeManager, for {@code spark-submit
 * --master yarn}.
 *
 * <p>Usage: {@code MiniYarn BASE_DIR CONF_DIR [DEFAULT_FS]}. The cluster keeps its directories
 * (the NodeManager's local and log directories) under {@code BASE_DIR}; {@code DEFAULT_FS} (an
 * {@code hdfs://} URI) is its file system and its clients', where Spark stages an application's
 * files. Once the NodeManager has registered, {@code CONF_DIR} holds a client's {@code
 * core-site.xml} and {@code yarn-site.xml} (a {@code HADOOP_CONF_DIR}), and the first line on
 * stdout is JSON with the ResourceManager's addresses and the NodeManager's log directory, where
 * each container's output is: {@code {"address": "localhost:P", "scheduler_address": ...,
 * "resource_tracker_address": ..., "admin_address": ..., "web_address": ..., "log_dir": "/..."}}.
 *
 * <p>The NodeManager gives containers 4 GB and 2 cores without checking what their processes use,
 * and runs them as the user of this JVM with its JDK as {@code JAVA_HOME}. Applications run in
 * one queue of the Capacity scheduler; a failed application master is started again once (YARN's
 * default of 2 attempts).
 *
 * <p>Then each line on stdin is a command, answered by one line, {@code ok} or {@code error:
 * MESSAGE}: {@code end-applications} kills the applications that run and answers once their
 * containers have ended. The end of stdin does the same and shuts the cluster down. Logs go to
 * stderr.
 */
public final class MiniYarn {
  private static final long WAIT_MS = 60_000;
  /** The NodeManager's memory for containers: an application master and two executors. */
  private static final int NODE_MEMORY_MB = 4096;

  /** The ResourceManager's addresses, as the JSON line names them, and their settings. */
  private static final String[][] ADDRESSES = {
    {"address", YarnConfiguration.RM_ADDRESS},
    {"scheduler_address", YarnConfiguration.RM_SCHEDULER_ADDRESS},
    {"resource_tracker_address", YarnConfiguration.RM_RESOURCE_TRACKER_ADDRESS},
    {"admin_address", YarnConfiguration.RM_ADMIN_ADDRESS},
    {"web_address", YarnConfiguration.RM_WEBAPP_ADDRESS},
  };

  private MiniYarn() {}

  public static void main(String[] args) {
    int status = 0;
    try {
      serve(args);
    } catch (Throwable e) {
      e.printStackTrace();
      status = 1;
    }
    // The servers end with the JVM, whatever failed: stopped, a NodeManager would wait some
    // 17 s for the applications it ran, whose logs it keeps.
    System.exit(status);
  }

  private static void serve(String[] args) throws Exception {
    PrintStream replies = System.out;
    System.setOut(System.err);
    File base = new File(args[0]).getAbsoluteFile();
    File confDir = new File(args[1]);
    String defaultFs = args.length > 2 ? args[2] : null;
    // MiniYARNCluster makes its directories under the tests' data directory.
    System.setProperty("test.build.data", base.getPath());

    MiniYARNCluster cluster = new MiniYARNCluster("yarn", 1, 1, 1);
    cluster.init(configuration(defaultFs));
    cluster.start();
    try {
      Configuration started = cluster.getResourceManager().getConfig();
      waitRegistered(cluster, started);
      writeClientConfiguration(started, confDir, defaultFs);
      StringBuilder json = new StringBuilder("{");
      for (String[] address : ADDRESSES) {
        json.append(quote(address[0])).append(": ").append(quote(started.get(address[1])));
        json.append(", ");
      }
      String logDir =
          cluster.getNodeManager(0).getConfig().get(YarnConfiguration.NM_LOG_DIRS);
      json.append(quote("log_dir")).append(": ").append(quote(logDir)).append("}");
      replies.println(json);
      replies.flush();

      BufferedReader commands =
          new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
      for (String line; (line = commands.readLine()) != null; ) {
        replies.println(run(cluster, line.trim()));
        replies.flush();
      }
    } finally {
      endApplications(cluster);
    }
  }

  private static String run(MiniYARNCluster cluster, String command) {
    if (!command.equals("end-applications")) {
      return "error: unknown command " + command;
    }
    try {
      endApplications(cluster);
      return "ok";
    } catch (Exception e) {
      e.printStackTrace();
      return ("error: " + e).replace('\n', ' ');
    }
  }

  /** Kills the applications that still run, and waits until their containers have ended. */
  private static void endApplications(MiniYARNCluster cluster) throws Exception {
    ResourceManager resourceManager = cluster.getResourceManager();
    for (RMApp app : resourceManager.getRMContext().getRMApps().values()) {
      if (!app.isAppInCompletedStates()) {
        resourceManager
            .getClientRMService()
            .forceKillApplication(KillApplicationRequest.newInstance(app.getApplicationId()));
      }
    }
    Collection<Container> containers =
        cluster.getNodeManager(0).getNMContext().getContainers().values();
    long deadline = System.currentTimeMillis() + WAIT_MS;
    while (containers.stream().anyMatch(c -> c.getContainerState() != ContainerState.DONE)
        && System.currentTimeMillis() < deadline) {
      Thread.sleep(50);
    }
  }

  private static YarnConfiguration configuration(String defaultFs) {
    YarnConfiguration conf = new YarnConfiguration();
    if (defaultFs != null) {
      conf.set("fs.defaultFS", defaultFs);
    }
    // The Capacity scheduler with one queue, whose application masters may take all of its
    // memory (by default a tenth: less than one Spark driver), and which places a container on
    // the node that asks at once.
    conf.set("yarn.scheduler.capacity.root.queues", "default");
    conf.setInt("yarn.scheduler.capacity.root.default.capacity", 100);
    conf.setInt("yarn.scheduler.capacity.root.default.maximum-capacity", 100);
    conf.setFloat("yarn.scheduler.capacity.maximum-am-resource-percent", 1.0f);
    conf.setInt("yarn.scheduler.capacity.node-locality-delay", -1);
    // Containers in steps of 128 MB, up to the node's memory and 2 cores; a container's memory
    // is bookkeeping only (no checks of what its processes use).
    conf.setInt(YarnConfiguration.RM_SCHEDULER_MINIMUM_ALLOCATION_MB, 128);
    conf.setInt(YarnConfiguration.RM_SCHEDULER_MAXIMUM_ALLOCATION_MB, NODE_MEMORY_MB);
    conf.setInt("yarn.minicluster.yarn.nodemanager.resource.memory-mb", NODE_MEMORY_MB);
    conf.setInt(YarnConfiguration.NM_VCORES, 2);
    conf.setInt(YarnConfiguration.RM_SCHEDULER_MAXIMUM_ALLOCATION_VCORES, 2);
    conf.setBoolean(YarnConfiguration.NM_PMEM_CHECK_ENABLED, false);
    conf.setBoolean(YarnConfiguration.NM_VMEM_CHECK_ENABLED, false);
    // A full disk of the machine's does not make the node unhealthy (then it runs nothing).
    conf.setFloat(
        YarnConfiguration.NM_MAX_PER_DISK_UTILIZATION_PERCENTAGE, 100.0f);
    // The scheduler places containers as the NodeManager's heartbeats come: twice a second.
    conf.setLong(YarnConfiguration.RM_NM_HEARTBEAT_INTERVAL_MS, 500);
    // Containers start Java from JAVA_HOME: this cluster's JDK, as a node's hadoop-env.sh names it.
    conf.set(YarnConfiguration.NM_ADMIN_USER_ENV, "JAVA_HOME=" + System.getProperty("java.home"));
    return conf;
  }

  /** Waits until the NodeManager has registered and the ResourceManager knows its ports. */
  private static void waitRegistered(MiniYARNCluster cluster, Configuration started)
      throws InterruptedException {
    long deadline = System.currentTimeMillis() + WAIT_MS;
    while (cluster.getResourceManager().getRMContext().getRMNodes().isEmpty()
        || !portsKnown(started)) {
      if (System.currentTimeMillis() > deadline) {
        throw new IllegalStateException("the NodeManager did not register");
      }
      Thread.sleep(50);
    }
  }

  private static boolean portsKnown(Configuration started) {
    for (String[] address : ADDRESSES) {
      String value = started.get(address[1]);
      if (value == null || value.endsWith(":0")) {
        return false;
      }
    }
    return true;
  }

  /** A client's {@code core-site.xml} and {@code yarn-site.xml} in {@code confDir}. */
  private static void writeClientConfiguration(
      Configuration started, File confDir, String defaultFs) throws IOException {
    if (!confDir.isDirectory() && !confDir.mkdirs()) {
      throw new IOException("cannot make " + confDir);
    }
    Configuration core = new Configuration(false);
    if (defaultFs != null) {
      core.set("fs.defaultFS", defaultFs);
    }
    write(core, new File(confDir, "core-site.xml"));
    Configuration yarn = new Configuration(false);
    for (String[] address : ADDRESSES) {
      yarn.set(address[1], started.get(address[1]));
    }
    write(yarn, new File(confDir, "yarn-site.xml"));
  }

  private static void write(Configuration conf, File file) throws IOException {
    try (OutputStream out = new FileOutputStream(file)) {
      conf.writeXml(out);
    }
  }

  private static String quote(String text) {
    return '"' + text.replace("\\", "\\\\").replace("\"", "\\\"") + '"';
  }
}
