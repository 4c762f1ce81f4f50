import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.server.datanode.DataNode;
import org.apache.hadoop.hdfs.server.namenode.NameNode;

/**
 * A one-DataNode HDFS on loopback, driven over stdin and stdout.
 *
 * <p>Usage: {@code MiniHdfs BASE_DIR [RPC_PORT [HTTP_PORT]]} (port 0, the default, takes a free
 * one). Once the cluster is up, the first line on stdout is JSON with the NameNode's ports:
 * {@code {"rpc_port": P, "http_port": Q}}. Then each line on stdin is a command, answered by one
 * line, {@code ok} or {@code error: MESSAGE}:
 *
 * <ul>
 *   <li>{@code restart-namenode}: stops the NameNode and starts it again on the same ports; with a
 *       DataNode running, answers once the NameNode has left safe mode.
 *   <li>{@code stop-datanode}: stops the DataNode.
 *   <li>{@code start-datanode}: starts it again on the same ports and storage, and answers once
 *       the NameNode has it registered and is out of safe mode.
 * </ul>
 *
 * The end of stdin shuts the cluster down. Logs go to stderr.
 */
public final class MiniHdfs {
  private static final long WAIT_MS = 60_000;

  private final MiniDFSCluster cluster;
  private MiniDFSCluster.DataNodeProperties stoppedDataNode;

  private MiniHdfs(MiniDFSCluster cluster) {
    this.cluster = cluster;
  }

  public static void main(String[] args) throws Exception {
    PrintStream replies = System.out;
    System.setOut(System.err);
    File base = new File(args[0]);
    int rpcPort = args.length > 1 ? Integer.parseInt(args[1]) : 0;
    int httpPort = args.length > 2 ? Integer.parseInt(args[2]) : 0;

    MiniDFSCluster cluster =
        new MiniDFSCluster.Builder(configuration(), base)
            .nameNodePort(rpcPort)
            .nameNodeHttpPort(httpPort)
            .numDataNodes(1)
            .format(true)
            .build();
    cluster.waitActive();
    MiniHdfs hdfs = new MiniHdfs(cluster);
    replies.printf(
        "{\"rpc_port\": %d, \"http_port\": %d}%n",
        cluster.getNameNodePort(), cluster.getNameNode().getHttpAddress().getPort());
    replies.flush();

    BufferedReader commands =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    try {
      for (String line; (line = commands.readLine()) != null; ) {
        replies.println(hdfs.run(line.trim()));
        replies.flush();
      }
    } finally {
      cluster.shutdown(true);
    }
  }

  private static Configuration configuration() {
    Configuration conf = new Configuration();
    conf.setInt("dfs.replication", 1);
    conf.setBoolean("dfs.permissions.enabled", false);
    conf.setBoolean("dfs.webhdfs.enabled", true);
    conf.setInt("dfs.namenode.safemode.extension", 0);
    // Heartbeats every second, so that a restarted DataNode or NameNode is in touch at once; a
    // stopped DataNode is dead to the NameNode after 14 s (twice the recheck, ten heartbeats).
    conf.setLong("dfs.heartbeat.interval", 1);
    conf.setInt("dfs.namenode.heartbeat.recheck-interval", 2_000);
    conf.setInt("dfs.namenode.stale.datanode.interval", 5_000);
    // Closing a file waits until the NameNode has the DataNode's report of its last block: the
    // clients inside the cluster (WebHDFS writes go through the DataNode's) ask again after
    // 20 ms, where they would wait 400.
    conf.setInt("dfs.client.block.write.locateFollowingBlock.initial.delay.ms", 20);
    // They also close idle connections at once, so that none is left to a NameNode that has
    // restarted.
    conf.setInt("ipc.client.connection.maxidletime", 500);
    return conf;
  }

  private String run(String command) {
    try {
      switch (command) {
        case "restart-namenode":
          restartNameNode();
          return "ok";
        case "stop-datanode":
          stopDataNode();
          return "ok";
        case "start-datanode":
          startDataNode();
          return "ok";
        default:
          return "error: unknown command " + command;
      }
    } catch (Exception e) {
      e.printStackTrace();
      return ("error: " + e).replace('\n', ' ');
    }
  }

  private void restartNameNode() throws Exception {
    cluster.restartNameNode(false);
    if (stoppedDataNode == null) {
      cluster.waitActive();
      waitOutOfSafeMode();
    }
  }

  private void stopDataNode() {
    if (stoppedDataNode != null) {
      throw new IllegalStateException("the DataNode is stopped already");
    }
    stoppedDataNode = cluster.stopDataNode(0);
  }

  private void startDataNode() throws Exception {
    if (stoppedDataNode == null) {
      throw new IllegalStateException("the DataNode is running");
    }
    cluster.restartDataNode(stoppedDataNode, true);
    stoppedDataNode = null;
    cluster.waitActive();
    DataNode dataNode = cluster.getDataNodes().get(0);
    cluster.waitDatanodeFullyStarted(dataNode, (int) WAIT_MS);
    waitOutOfSafeMode();
  }

  /** Waits until the NameNode has the blocks reported that it needs to leave safe mode. */
  private void waitOutOfSafeMode() throws InterruptedException {
    NameNode nameNode = cluster.getNameNode();
    long deadline = System.currentTimeMillis() + WAIT_MS;
    while (nameNode.isInSafeMode()) {
      if (System.currentTimeMillis() > deadline) {
        throw new IllegalStateException("the NameNode is still in safe mode");
      }
      Thread.sleep(50);
    }
  }
}
